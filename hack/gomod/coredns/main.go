// A CoreDNS with only the plugins the box needs (bind, kubernetes, cache, errors, log, health, ready): cluster DNS for the real nodes' pods
// (Services and the training operator's per-replica headless Services), nothing upstream.
// The same way CoreDNS documents custom builds: set dnsserver.Directives, import the plugins.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// the order in which the plugins run, as in CoreDNS's plugin.cfg
var directives = []string{"bind", "log", "errors", "health", "ready", "cache", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }

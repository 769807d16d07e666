"""``python -m volcano_elastic_job.run [torchrun arguments]``: torchrun with volcano-elastic's
rendezvous (see :mod:`volcano_elastic_job.rendezvous`).

Every torchrun argument and ``PET_*`` variable works as with ``torchrun``; the c10d rendezvous
(``--rdzv-backend=c10d``, what the training operator sets) completes a round as soon as the worker
count volcano-elastic announced has joined, and an agent stopped by SIGTERM leaves the rendezvous
on its way out. On torch < 2.4 it also looks at its workers every second (torch's default there is
5 s), and reads ``--redirects``/``--tee`` right on Python 3.11. ``VOLCANO_ELASTIC_RDZV=off`` runs
plain torchrun.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import sys
from typing import Any

from . import rendezvous

log = logging.getLogger("volcano_elastic_job")


def fix_std_from_str(std: Any) -> bool:
    """torch < 2.1 on Python >= 3.11 reads ``--redirects``/``--tee`` "0" (their default) and "3" as
    None (``Std.from_str`` looks the value up by iterating the IntFlag, which since 3.11 yields only
    single-bit members) and the agent fails in ``start_processes``. Read them as ``Std(n)``. True
    when it had to."""
    if std.from_str("0") is not None:
        return False

    def from_str(vm: str) -> Any:
        if re.fullmatch(r"[0-3]", vm):
            return std(int(vm))
        if re.fullmatch(r"(\d:[0-3],)*\d:[0-3]", vm):
            return {int(i): std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        raise ValueError(f"{vm} does not match: [0-3] or <rank>:[0-3],...")

    std.from_str = from_str
    return True


MONITOR_INTERVAL = 1.0  # seconds between the agent's looks at its workers and the rendezvous


def faster_monitor(torchrun: Any, argv: list[str]) -> bool:
    """torch < 2.4 looks at its workers (and at nodes waiting to join) every 5 s, so a failed peer
    or a new node waits up to 5 s before the restart even begins; torch 2.4+ looks every 0.1 s.
    Where torch's default is slower than :data:`MONITOR_INTERVAL` and neither ``--monitor-interval``
    nor ``PET_MONITOR_INTERVAL`` says otherwise, use it. True when it did."""
    if os.environ.get("PET_MONITOR_INTERVAL") or any(a.startswith(("--monitor_interval", "--monitor-interval"))
                                                     for a in argv):
        return False
    try:
        default = float(torchrun.get_args_parser().get_default("monitor_interval"))
    except (AttributeError, TypeError, ValueError):
        return False
    if default <= MONITOR_INTERVAL:
        return False
    os.environ["PET_MONITOR_INTERVAL"] = str(MONITOR_INTERVAL)  # torchrun's parser reads PET_* when built
    return True


def main(argv: list[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] in ("-h", "--help") and os.environ.get("VOLCANO_ELASTIC_RDZV") != "off":
        print(__doc__.strip() + "\n\ntorchrun's own help follows.\n")
    torchrun: Any = importlib.import_module("torch.distributed.run")
    if os.environ.get("VOLCANO_ELASTIC_RDZV") == "off":
        torchrun.main(argv)
        return
    rendezvous.register(replace_c10d=True)
    multiprocessing: Any = importlib.import_module("torch.distributed.elastic.multiprocessing")
    fix_std_from_str(multiprocessing.Std)
    faster_monitor(torchrun, argv)
    try:
        torchrun.main(argv)
    except (multiprocessing.SignalException, KeyboardInterrupt):
        if rendezvous.leave():
            log.warning("volcano-elastic: stopped by a signal; left the rendezvous")
        raise


if __name__ == "__main__":
    main()

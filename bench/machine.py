"""What every benchmark records about the machine it ran on."""

from __future__ import annotations

import contextlib
import os
import platform
from importlib.metadata import version
from pathlib import Path
from typing import Any


def machine_info(*packages: str) -> dict[str, Any]:
    """Cores, CPU model, memory, OS, Python, the given packages' versions and the load average."""
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "mem_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        **{package.replace("-", "_"): version(package) for package in packages},
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }

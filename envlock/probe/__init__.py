"""Probing the live machine into a :class:`~envlock.snapshot.Snapshot`.

Each backend is a small module that returns values and never raises for a missing
facility (no driver, no NVML, unreadable sysfs): what it cannot learn is ``None`` plus a
note. ``take_snapshot`` composes them; only the CLI calls it by default, everything else
takes a snapshot argument.
"""

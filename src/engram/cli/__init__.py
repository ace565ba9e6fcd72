"""The ``engram`` command line (entry point :func:`engram.cli.main.main`).

Deliberately empty of imports: feature modules import :mod:`engram.cli._common`, and
importing this package must not pull in :mod:`engram.cli.main`, which imports them.
"""

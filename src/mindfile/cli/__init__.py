"""The ``mindfile`` command line (entry point :func:`mindfile.cli.main.main`).

Deliberately empty of imports: feature modules import :mod:`mindfile.cli._common`, and
importing this package must not pull in :mod:`mindfile.cli.main`, which imports them.
"""

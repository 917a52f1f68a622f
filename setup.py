"""The one compiled module of the package; optional, so that a machine without a C compiler still installs
crawlspace (crawlspace.seen.shingles then computes signatures with numpy)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("crawlspace.seen._minhash", ["crawlspace/seen/_minhash.c"], optional=True)])

"""`python -m crawlspace.simweb serve ...`: the simweb CLI without the rest of crawlspace."""

from crawlspace.simweb.cli import simweb

if __name__ == "__main__":
    simweb(prog_name="python -m crawlspace.simweb")

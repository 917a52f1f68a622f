from crawlspace.cli import main

main()

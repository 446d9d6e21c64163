from ckptlint.cli import main

main()

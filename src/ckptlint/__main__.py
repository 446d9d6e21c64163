from ckptlint._entry import main

main()

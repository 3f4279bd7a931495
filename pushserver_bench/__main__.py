from pushserver_bench import main

main()

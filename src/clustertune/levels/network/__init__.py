"""Network and message-passing levels: ping-pong over TCP, MPI and PVM, and all-pairs diagnosis."""

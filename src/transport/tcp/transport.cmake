# TCP between any two ranks (mesh row "tcp").
mci_transport_parts(SOURCES tcp_connect.cpp tcp_handshake.cpp tcp_links.cpp tcp_transport.cpp)

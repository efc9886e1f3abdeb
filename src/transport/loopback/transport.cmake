# A rank's messages to itself (a world of one; not a mesh row).
mci_transport_parts(SOURCES loopback_transport.cpp)

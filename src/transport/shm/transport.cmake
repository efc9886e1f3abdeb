# Shared memory between the ranks of a host (a ShmWorld, not a mesh row:
# MCI_TRANSPORT's auto and shm use it, beside the mesh); POSIX shared
# memory needs librt.
mci_transport_parts(SOURCES cpu_spread.cpp shm_connect.cpp shm_segment.cpp shm_single_copy.cpp shm_world.cpp
                    LIBS rt)

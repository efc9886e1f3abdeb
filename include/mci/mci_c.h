/* mci's C interface: the process group for languages that reach C (Python
 * through ctypes: the mci_torch package). Every call returns an mci_status;
 * on failure mci_last_error() holds the message for the calling thread.
 * Buffers are host memory, owned by the caller, and must stay alive until
 * the operation's work has completed. */
#ifndef MCI_MCI_C_H
#define MCI_MCI_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mci_group mci_group;
typedef struct mci_work mci_work;
typedef struct mci_store_server mci_store_server;

/* Which mci::Error a failure was. */
enum mci_status {
  MCI_OK = 0,
  MCI_ERR_CONFIG = 1,   /* ConfigError: bad arguments or settings */
  MCI_ERR_TIMEOUT = 2,  /* TimeoutError: the text has the hang report */
  MCI_ERR_PEER = 3,     /* PeerError: a peer died or left */
  MCI_ERR_MISMATCH = 4, /* MismatchError: ranks called different operations */
  MCI_ERR_OTHER = 5
};

/* Element types and reductions: the values of mci::DType and mci::ReduceOp. */
enum mci_dtype { MCI_F32 = 0, MCI_F64, MCI_F16, MCI_BF16, MCI_I8, MCI_U8, MCI_I32, MCI_I64 };
enum mci_reduce_op { MCI_SUM = 0, MCI_AVG, MCI_PROD, MCI_MIN, MCI_MAX };

enum mci_op_kind {
  MCI_ALL_REDUCE = 0, /* in -> out (in == out: in place), count elements */
  MCI_BROADCAST,      /* out from root's in (in == out on every rank) */
  MCI_REDUCE,         /* root's out <- reduction of in */
  MCI_ALL_GATHER,     /* out (size * count) <- every rank's in (count) */
  MCI_GATHER,         /* root's out (size * count) <- every rank's in (count) */
  MCI_SCATTER,        /* out (count) <- slice rank of root's in (size * count) */
  MCI_REDUCE_SCATTER, /* out (count) <- slice rank of the reduction of in (size * count) */
  MCI_ALL_TO_ALL,     /* slice j of in (count each) to rank j */
  MCI_BARRIER,
  MCI_SEND,        /* in (count) to peer */
  MCI_RECV,        /* out (count) from peer */
  MCI_NUM_OP_KINDS /* how many kinds there are (not a kind) */
};

typedef struct mci_op {
  int kind; /* mci_op_kind */
  void* in;
  void* out;
  size_t count;
  int dtype; /* mci_dtype */
  int op;    /* mci_reduce_op */
  int root;  /* broadcast, reduce, gather, scatter */
  int peer;  /* send, recv */
  int tag;   /* send, recv */
  int async; /* 0: runs now; 1: queued on the group's progress thread */
} mci_op;

const char* mci_last_error(void);

/* The kind's name, as mci's messages and the flight recorder spell it
 * ("all_reduce"); NULL for a value that is not an mci_op_kind. */
const char* mci_op_kind_name(int kind);

/* A store server on bind_host (":0" port picked by the OS) whose clients
 * must prove token (empty: none). */
int mci_store_server_start(const char* bind_host, const char* token, mci_store_server** out, int* port);
void mci_store_server_free(mci_store_server* s);

/* Joins a group through the store at host:port. backend: "cpu", "gloo"...;
 * name keeps groups sharing a store apart. settings: NULL, or a
 * NULL-terminated array of "NAME=VALUE" strings, mci's settings
 * (docs/env.md) given to this group; they win over the environment. */
int mci_group_new(const char* host, int port, const char* token, int rank, int size, int64_t timeout_ms,
                  const char* backend, const char* name, const char* const* settings, mci_group** out);
/* Drains queued work and closes the group. */
void mci_group_free(mci_group* g);
/* Fails queued work and breaks the connections (peers notice at once). */
int mci_group_abort(mci_group* g, const char* reason);

/* Runs (async == 0) or queues (async == 1) one operation. With async, *work
 * receives a handle to wait on and free; without, *work may be NULL. */
int mci_run(mci_group* g, const mci_op* op, mci_work** work);

/* Waits until done (bounded by the group's timeout); the operation's status. */
int mci_work_wait(mci_work* w);
int mci_work_is_completed(const mci_work* w);
double mci_work_duration_ms(const mci_work* w);
void mci_work_free(mci_work* w);

#ifdef __cplusplus
}
#endif

#endif

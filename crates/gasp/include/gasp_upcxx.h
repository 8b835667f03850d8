/* gasp_upcxx.h: the GASP events of the Rust PGAS stack (upcxx and gex).
 * Generated from crates/gasp/src/events.rs; do not edit: a test checks that this
 * file matches the table. Included by gasp.h. */
#ifndef GASP_UPCXX_H
#define GASP_UPCXX_H

#include <stdint.h>

#define GASP_UPCXX_VERSION 7

/* A pointer-to-shared: the owning rank and the address in the owner's address
 * space. Events pass a pointer to one (GASP section 5.4). */
typedef struct {
    uint32_t rank;
    uint64_t addr;
} gasp_upcxx_gptr_t;

/* The handle of a non-blocking operation (GASP section 5.4.6). */
typedef uint64_t gasp_upc_nb_handle_t;
#define GASP_NB_TRIVIAL 0
#define GASP_NB_IMPLICIT 1

/* The element type of a reduction (GASP section 5.4.8), passed as an int;
 * GASP_GEX_REDUCTION_USER is ours, for a user data type. */
typedef enum {
    GASP_UPC_REDUCTION_C = 0,
    GASP_UPC_REDUCTION_UC = 1,
    GASP_UPC_REDUCTION_S = 2,
    GASP_UPC_REDUCTION_US = 3,
    GASP_UPC_REDUCTION_I = 4,
    GASP_UPC_REDUCTION_UI = 5,
    GASP_UPC_REDUCTION_L = 6,
    GASP_UPC_REDUCTION_UL = 7,
    GASP_UPC_REDUCTION_F = 8,
    GASP_UPC_REDUCTION_D = 9,
    GASP_UPC_REDUCTION_LD = 10,
    GASP_GEX_REDUCTION_USER = 11,
} gasp_upc_reduction_t;

/* Tags returned by gasp_create_event (GASP section 5.3). */
#define GASP_UPCXX_USEREVT_START 0x10000
#define GASP_UPCXX_USEREVT_END 0x1ffff

/* System events. For each: the event types it is reported with and the varargs
 * of gasp_event_notify for each type. */

/* UPC §5.4.1: the collective end of the program (`upcxx::finalize`, `gex::Client::finalize`), around its final barrier.
 *   GASP_START: int status
 *   GASP_END:   int status
 */
#define GASP_UPC_COLLECTIVE_EXIT 0x1

/* UPC §5.4.1: a non-collective exit (`gex::exit`).
 *   GASP_ATOMIC: int status
 */
#define GASP_UPC_NONCOLLECTIVE_EXIT 0x2

/* UPC §5.4.2: the notify half of a split-phase barrier (`gex::Team::barrier_nb`).
 *   GASP_START: int named, int expr
 *   GASP_END:   int named, int expr
 */
#define GASP_UPC_NOTIFY 0x3

/* UPC §5.4.2: the wait half of a split-phase barrier: the sync of the event of `gex::Team::barrier_nb` (`gex::Event::wait`, or a test or wait of several that retires it).
 *   GASP_START: int named, int expr
 *   GASP_END:   int named, int expr
 */
#define GASP_UPC_WAIT 0x4

/* UPC §5.4.2: a blocking barrier (`upcxx::barrier`, `gex::Team::barrier`).
 *   GASP_START: int named, int expr
 *   GASP_END:   int named, int expr
 */
#define GASP_UPC_BARRIER 0x5

/* UPC §5.4.4: allocation in the calling rank's shared segment (`upcxx::allocate`, `new_`, `new_array`).
 *   GASP_START: size_t nbytes
 *   GASP_END:   size_t nbytes, gasp_upcxx_gptr_t *newshrd_ptr
 */
#define GASP_UPC_ALLOC 0x14

/* UPC §5.4.4: freeing shared memory (`upcxx::deallocate`, `delete_`, `delete_array`).
 *   GASP_START: gasp_upcxx_gptr_t *shrd_ptr
 *   GASP_END:   gasp_upcxx_gptr_t *shrd_ptr
 */
#define GASP_UPC_FREE 0x15

/* UPC §5.4.4: acquiring a lock (`gex::Hsl::lock`; `lck` is the lock's address).
 *   GASP_START: void *lck
 *   GASP_END:   void *lck
 */
#define GASP_UPC_LOCK 0x16

/* UPC §5.4.4: trying a lock (`gex::Hsl::try_lock`); `result` is nonzero on success.
 *   GASP_START: void *lck
 *   GASP_END:   void *lck, int result
 */
#define GASP_UPC_LOCK_ATTEMPT 0x17

/* UPC §5.4.4: releasing a lock (`gex::Hsl::unlock`).
 *   GASP_START: void *lck
 *   GASP_END:   void *lck
 */
#define GASP_UPC_UNLOCK 0x18

/* UPC §5.4.5: a blocking get (`gex::Team::get_blocking`, `get_val`).
 *   GASP_START: int is_relaxed, void *dst, gasp_upcxx_gptr_t *src, size_t n
 *   GASP_END:   int is_relaxed, void *dst, gasp_upcxx_gptr_t *src, size_t n
 */
#define GASP_UPC_GET 0x1e

/* UPC §5.4.5: a blocking put (`gex::Team::put_blocking`, `put_val`).
 *   GASP_START: int is_relaxed, gasp_upcxx_gptr_t *dst, void *src, size_t n
 *   GASP_END:   int is_relaxed, gasp_upcxx_gptr_t *dst, void *src, size_t n
 */
#define GASP_UPC_PUT 0x1f

/* UPC §5.4.6: initiating a non-blocking get (`upcxx::rget*`, `gex::Team::get_nb`, `get_nbi`). The END's handle is `GASP_NB_TRIVIAL` when the data had arrived before the call returned.
 *   GASP_START: int is_relaxed, void *dst, gasp_upcxx_gptr_t *src, size_t n
 *   GASP_END:   int is_relaxed, void *dst, gasp_upcxx_gptr_t *src, size_t n, gasp_upc_nb_handle_t handle
 */
#define GASP_UPC_NB_GET_INIT 0x28

/* UPC §5.4.6: initiating a non-blocking put (`upcxx::rput*`, `gex::Team::put_nb`, `put_nbi`).
 *   GASP_START: int is_relaxed, gasp_upcxx_gptr_t *dst, void *src, size_t n
 *   GASP_END:   int is_relaxed, gasp_upcxx_gptr_t *dst, void *src, size_t n, gasp_upc_nb_handle_t handle
 */
#define GASP_UPC_NB_PUT_INIT 0x29

/* UPC §5.4.6: the sync that retires non-blocking operations: waiting for them (`gex::Event::wait`, `wait_all`, `gex::nbi_wait`; `GASP_NB_IMPLICIT` names all implicit-handle operations), or a test (`Event::test`, `test_some`, `test_all`, `gex::nbi_test`) or `Event::wait_some` that found them complete.
 *   GASP_START: gasp_upc_nb_handle_t handle
 *   GASP_END:   gasp_upc_nb_handle_t handle
 */
#define GASP_UPC_NB_SYNC 0x2a

/* UPC §5.4.8: initiating a broadcast from the root's `src` to every rank's `dst` (`gex_Coll_BroadcastNB`, `gasnet_coll_broadcast_nb`).
 *   GASP_START: void *dst, void *src, size_t nbytes, int upc_flags
 *   GASP_END:   void *dst, void *src, size_t nbytes, int upc_flags, gasp_upc_nb_handle_t handle
 */
#define GASP_UPC_ALL_BROADCAST 0x32

/* UPC §5.4.8: initiating a scatter of the root's `src`, one `nbytes` block to each rank's `dst` (`gasnet_coll_scatter_nb`).
 *   GASP_START: void *dst, void *src, size_t nbytes, int upc_flags
 *   GASP_END:   void *dst, void *src, size_t nbytes, int upc_flags, gasp_upc_nb_handle_t handle
 */
#define GASP_UPC_ALL_SCATTER 0x33

/* UPC §5.4.8: initiating a gather of every rank's `nbytes` block into the root's `dst` (`gasnet_coll_gather_nb`).
 *   GASP_START: void *dst, void *src, size_t nbytes, int upc_flags
 *   GASP_END:   void *dst, void *src, size_t nbytes, int upc_flags, gasp_upc_nb_handle_t handle
 */
#define GASP_UPC_ALL_GATHER 0x34

/* UPC §5.4.8: initiating a gather of every rank's block into every rank's `dst` (`gasnet_coll_gather_all_nb`).
 *   GASP_START: void *dst, void *src, size_t nbytes, int upc_flags
 *   GASP_END:   void *dst, void *src, size_t nbytes, int upc_flags, gasp_upc_nb_handle_t handle
 */
#define GASP_UPC_ALL_GATHER_ALL 0x35

/* UPC §5.4.8: initiating an exchange, block `j` of rank `i`'s `src` to block `i` of rank `j`'s `dst` (`gasnet_coll_exchange_nb`).
 *   GASP_START: void *dst, void *src, size_t nbytes, int upc_flags
 *   GASP_END:   void *dst, void *src, size_t nbytes, int upc_flags, gasp_upc_nb_handle_t handle
 */
#define GASP_UPC_ALL_EXCHANGE 0x36

/* UPC §5.4.8: initiating a permute, each rank's block to the `dst` of the rank its entry of `perm` names.
 *   GASP_START: void *dst, void *src, void *perm, size_t nbytes, int upc_flags
 *   GASP_END:   void *dst, void *src, void *perm, size_t nbytes, int upc_flags, gasp_upc_nb_handle_t handle
 */
#define GASP_UPC_ALL_PERMUTE 0x37

/* UPC §5.4.8: initiating a reduction to one rank, element-wise over the ranks' `src` into the root's `dst` (`gex_Coll_ReduceToOneNB`).
 *   GASP_START: void *dst, void *src, int upc_op, size_t nelems, size_t elem_size, void *func, int upc_flags, int reduction_type
 *   GASP_END:   void *dst, void *src, int upc_op, size_t nelems, size_t elem_size, void *func, int upc_flags, int reduction_type, gasp_upc_nb_handle_t handle
 */
#define GASP_UPC_ALL_REDUCE 0x38

/* UPC §5.4.8: initiating a prefix reduction (scan): rank `i`'s `dst` gets the reduction of the `src` of ranks `0..=i`.
 *   GASP_START: void *dst, void *src, int upc_op, size_t nelems, size_t elem_size, void *func, int upc_flags, int reduction_type
 *   GASP_END:   void *dst, void *src, int upc_op, size_t nelems, size_t elem_size, void *func, int upc_flags, int reduction_type, gasp_upc_nb_handle_t handle
 */
#define GASP_UPC_ALL_PREFIX_REDUCE 0x39

/* Sending a remote procedure call (`upcxx::rpc`, `rpc_ff`, `as_rpc` completions): `nbytes` is the size of the serialized call (0 at the START: the call is serialized inside the interval, straight into the message), `msgid` pairs it with its `GASP_UPCXX_RPC_EXECUTE` on the target.
 *   GASP_START: int target, size_t nbytes, uint64_t msgid
 *   GASP_END:   int target, size_t nbytes, uint64_t msgid
 */
#define GASP_UPCXX_RPC_SEND 0x100

/* Running a remote procedure call on its target (user code; events inside it are reported), up to sending its reply (or, if its result is a future not yet ready, up to arranging for the reply).
 *   GASP_START: int source, size_t nbytes, uint64_t msgid
 *   GASP_END:   int source, size_t nbytes, uint64_t msgid
 */
#define GASP_UPCXX_RPC_EXECUTE 0x101

/* Waiting for a future that is not ready (`upcxx::Future::wait`): the progress the wait makes until it is. A wait on a ready future takes no time and reports nothing.
 *   GASP_START: (none)
 *   GASP_END:   (none)
 */
#define GASP_UPCXX_FUTURE_WAIT 0x102

/* Fulfilling a promise (`upcxx::Promise::fulfill_result`, `fulfill_anonymous`): `count` dependencies are satisfied.
 *   GASP_ATOMIC: size_t count
 */
#define GASP_UPCXX_PROMISE_FULFILL 0x103

/* An explicit progress call (`upcxx::progress`): `level` is 0 for internal, 1 for user.
 *   GASP_START: int level
 *   GASP_END:   int level
 */
#define GASP_UPCXX_PROGRESS 0x104

/* A barrier over team `team` (`upcxx::coll::barrier`; `upcxx::barrier`, over the world, reports `GASP_UPC_BARRIER`): the whole wait.
 *   GASP_START: uint64_t team
 *   GASP_END:   uint64_t team
 */
#define GASP_UPCXX_BARRIER 0x110

/* Initiating a barrier over team `team` (`upcxx::barrier_async`). As for every UPC++ collective, the interval is the initiating call; the wait for its completion is the future's (`GASP_UPCXX_FUTURE_WAIT`).
 *   GASP_START: uint64_t team
 *   GASP_END:   uint64_t team
 */
#define GASP_UPCXX_BARRIER_ASYNC 0x111

/* Initiating a broadcast of `nbytes` bytes from team rank `root` of team `team` (`upcxx::broadcast`, `broadcast_buffer`).
 *   GASP_START: uint64_t team, int root, size_t nbytes
 *   GASP_END:   uint64_t team, int root, size_t nbytes
 */
#define GASP_UPCXX_BROADCAST 0x112

/* Initiating a reduction of `nelems` elements of `elem_size` bytes to team rank `root` of team `team` (`upcxx::reduce_one`, `reduce_one_buffer`); `upc_op` is the `gex` operation (`GEX_OP_USER`/`USER_NC` for a closure).
 *   GASP_START: uint64_t team, int root, size_t nelems, size_t elem_size, int upc_op
 *   GASP_END:   uint64_t team, int root, size_t nelems, size_t elem_size, int upc_op
 */
#define GASP_UPCXX_REDUCE_ONE 0x113

/* Initiating a reduction to every rank of team `team` (`upcxx::reduce_all`, `reduce_all_buffer`); the arguments as for `GASP_UPCXX_REDUCE_ONE`.
 *   GASP_START: uint64_t team, size_t nelems, size_t elem_size, int upc_op
 *   GASP_END:   uint64_t team, size_t nelems, size_t elem_size, int upc_op
 */
#define GASP_UPCXX_REDUCE_ALL 0x114

/* Splitting team `team` (`upcxx::Team::split`, collective and blocking) with this rank's `color` (negative for `color_none`) and `key`; the END adds the new team's id (`u64::MAX` for the invalid team of `color_none`).
 *   GASP_START: uint64_t team, int color, int key
 *   GASP_END:   uint64_t team, int color, int key, uint64_t new_team
 */
#define GASP_UPCXX_TEAM_SPLIT 0x115

/* Destroying team `team` (`upcxx::Team::destroy`, collective), entry barrier included.
 *   GASP_START: uint64_t team
 *   GASP_END:   uint64_t team
 */
#define GASP_UPCXX_TEAM_DESTROY 0x116

/* Building this rank's member of a distributed object over team `team` (`upcxx::DistObject::new`, collective, without communication); the END adds the object's number among the team's distributed objects (its id is the pair). The futures of `DistId::when_here` waiting for it are readied inside.
 *   GASP_START: uint64_t team
 *   GASP_END:   uint64_t team, uint64_t object
 */
#define GASP_UPCXX_DIST_OBJECT_CONSTRUCT 0x120

/* Initiating a fetch of the value of distributed object `object` of team `team` at team rank `rank` (`upcxx::DistObject::fetch`); the RPC it sends is reported inside, the wait for its value is the future's.
 *   GASP_START: uint64_t team, uint64_t object, int rank
 *   GASP_END:   uint64_t team, uint64_t object, int rank
 */
#define GASP_UPCXX_DIST_OBJECT_FETCH 0x121

/* Destroying this rank's member of distributed object `object` of team `team` (dropping the `upcxx::DistObject` that `new` returned). A drop has no caller's line, so the event is reported at the line that built the object.
 *   GASP_ATOMIC: uint64_t team, uint64_t object
 */
#define GASP_UPCXX_DIST_OBJECT_DESTROY 0x122

/* Initiating a non-contiguous put of `n` bytes to rank `target` (`upcxx::rput_irregular`, `rput_regular`, `rput_strided`; UPC++ ch. 15): `shape` is 0 irregular, 1 regular, 2 strided, `runs` the contiguous runs of the description (the sum over both sides for irregular and regular, the elements for strided). GASP has no non-contiguous events.
 *   GASP_START: int target, int shape, size_t runs, size_t n
 *   GASP_END:   int target, int shape, size_t runs, size_t n, gasp_upc_nb_handle_t handle
 */
#define GASP_UPCXX_VIS_PUT 0x130

/* Initiating a non-contiguous get of `n` bytes from rank `target` (`upcxx::rget_irregular`, `rget_regular`, `rget_strided`); the arguments as for `GASP_UPCXX_VIS_PUT`.
 *   GASP_START: int target, int shape, size_t runs, size_t n
 *   GASP_END:   int target, int shape, size_t runs, size_t n, gasp_upc_nb_handle_t handle
 */
#define GASP_UPCXX_VIS_GET 0x131

/* Initiating an atomic operation of an atomic domain (`upcxx::AtomicDomain::load`, `store`, `compare_exchange`, `fetch_add`, ...; UPC++ ch. 13) on the `nbytes`-byte object at `target`: `op` is the `gex` operation code (`gex_OP_t`), `dt` the data type (`gex_DT_t`), `operand1` and `operand2` the operands' bits (0 where the operation takes fewer). The wait for its value is the future's.
 *   GASP_START: gasp_upcxx_gptr_t *target, int op, int dt, uint64_t operand1, uint64_t operand2, size_t nbytes
 *   GASP_END:   gasp_upcxx_gptr_t *target, int op, int dt, uint64_t operand1, uint64_t operand2, size_t nbytes
 */
#define GASP_UPCXX_ATOMIC_OP 0x140

/* Constructing this rank's representative of an atomic domain over team `team` (`upcxx::AtomicDomain::new`, collective) for the operations `ops` (a bit set of `gex_OP_t`) on data type `dt`.
 *   GASP_START: uint64_t team, int dt, int ops
 *   GASP_END:   uint64_t team, int dt, int ops
 */
#define GASP_UPCXX_ATOMIC_DOMAIN_CONSTRUCT 0x141

/* Destroying an atomic domain over team `team` (`upcxx::AtomicDomain::destroy`, collective), entry barrier included.
 *   GASP_START: uint64_t team
 *   GASP_END:   uint64_t team
 */
#define GASP_UPCXX_ATOMIC_DOMAIN_DESTROY 0x142

/* Copying `n` bytes between memory of any kinds (`upcxx::copy`, `copy_from_host`, `copy_to_host`; UPC++ ch. 16): `peer` is the rank at the other end (the destination's, unless it is this rank's and the source's is not), `dst` and `src` the ends (a host slice as this rank's pointer), `dst_kind` and `src_kind` their memory kinds (`upcxx::KindId`: 1 host, 2 cuda_device). Complete inside the call; its notifications are the futures'.
 *   GASP_START: int peer, gasp_upcxx_gptr_t *dst, gasp_upcxx_gptr_t *src, int dst_kind, int src_kind, size_t n
 *   GASP_END:   int peer, gasp_upcxx_gptr_t *dst, gasp_upcxx_gptr_t *src, int dst_kind, int src_kind, size_t n
 */
#define GASP_UPCXX_COPY 0x150

/* Creating this rank's representative of a collective device of memory kind `kind` (`upcxx::CudaDevice::new`, collective over the world): `device` is its id, -1 for an inactive device.
 *   GASP_START: int kind, int device
 *   GASP_END:   int kind, int device
 */
#define GASP_UPCXX_DEVICE_CONSTRUCT 0x151

/* Destroying a collective device (`upcxx::CudaDevice::destroy`), entry barrier included.
 *   GASP_START: int kind, int device
 *   GASP_END:   int kind, int device
 */
#define GASP_UPCXX_DEVICE_DESTROY 0x152

/* Allocating the `nbytes`-byte segment of a device allocator on device `device` (`upcxx::DeviceAllocator::new`).
 *   GASP_START: int device, size_t nbytes
 *   GASP_END:   int device, size_t nbytes
 */
#define GASP_UPCXX_DEVICE_SEGMENT 0x153

/* Allocating `nbytes` in a device segment (`upcxx::DeviceAllocator::allocate`); the END adds the pointer (null when the segment had no room).
 *   GASP_START: int device, size_t nbytes
 *   GASP_END:   int device, size_t nbytes, gasp_upcxx_gptr_t *ptr
 */
#define GASP_UPCXX_DEVICE_ALLOC 0x154

/* Freeing device memory (`upcxx::DeviceAllocator::deallocate`).
 *   GASP_START: int device, gasp_upcxx_gptr_t *ptr
 *   GASP_END:   int device, gasp_upcxx_gptr_t *ptr
 */
#define GASP_UPCXX_DEVICE_FREE 0x155

/* Sending an Active Message Request (`gex::Team::am_request_*`): `category` is 0 Short, 1 Medium, 2 Long; `nbytes` the payload.
 *   GASP_START: int target, int handler, int category, size_t nbytes
 *   GASP_END:   int target, int handler, int category, size_t nbytes
 */
#define GASP_GEX_AM_REQUEST 0x200

/* Sending an Active Message Reply (`gex::Token::am_reply_*`).
 *   GASP_START: int target, int handler, int category, size_t nbytes
 *   GASP_END:   int target, int handler, int category, size_t nbytes
 */
#define GASP_GEX_AM_REPLY 0x201

/* Running a client's Active Message handler (user code).
 *   GASP_START: int source, int handler, int category, size_t nbytes
 *   GASP_END:   int source, int handler, int category, size_t nbytes
 */
#define GASP_GEX_AM_HANDLER 0x202

/* An explicit poll (`gex::poll`).
 *   GASP_START: (none)
 *   GASP_END:   (none)
 */
#define GASP_GEX_POLL 0x203

/* Waiting until at least one of `count` pending events is complete (`gex::Event::wait_some`). UPC syncs one handle at a time, so the wait is an event of its own; each event it finds complete is then reported retired by a `GASP_UPC_NB_SYNC` (or, for a barrier's, `GASP_UPC_WAIT`) of no duration.
 *   GASP_START: int count
 *   GASP_END:   int count
 */
#define GASP_GEX_WAIT_SOME 0x204

/* Initiating a barrier over team `team` (`gex_Coll_BarrierNB`). UPC's split-phase events cannot tell which of several barriers in flight a `GASP_UPC_WAIT` completes; this one is synced as a non-blocking operation, by the `GASP_UPC_NB_SYNC` of its END's handle.
 *   GASP_START: int team
 *   GASP_END:   int team, gasp_upc_nb_handle_t handle
 */
#define GASP_GEX_COLL_BARRIER 0x205

/* Initiating a reduction to all ranks, element-wise over the ranks' `src` into every rank's `dst` (`gex_Coll_ReduceToAllNB`): the list of `GASP_UPC_ALL_REDUCE`.
 *   GASP_START: void *dst, void *src, int upc_op, size_t nelems, size_t elem_size, void *func, int upc_flags, int reduction_type
 *   GASP_END:   void *dst, void *src, int upc_op, size_t nelems, size_t elem_size, void *func, int upc_flags, int reduction_type, gasp_upc_nb_handle_t handle
 */
#define GASP_GEX_COLL_REDUCE_TO_ALL 0x206

/* Splitting team `team` of `size` ranks (`gex_TM_Split`, collective and blocking): this rank's `color` (-1 for none) and `key`; the END adds the new team's id and size (-1 and 0 for a rank that gets no team).
 *   GASP_START: int team, int size, int color, int key
 *   GASP_END:   int team, int size, int color, int key, int new_team, int new_size
 */
#define GASP_GEX_TM_SPLIT 0x207

/* Destroying team `team` of `size` ranks (`gex_TM_Destroy`, collective).
 *   GASP_START: int team, int size
 *   GASP_END:   int team, int size
 */
#define GASP_GEX_TM_DESTROY 0x208

/* Initiating a VIS put of `n` bytes to rank `target` (`gex::Team::vector_put_*`, `indexed_put_*`, `strided_put_*`, every completion form; GASNet-EX `gex_VIS_*Put*`): `shape` is 0 vector, 1 indexed, 2 strided; `runs` the entries of both lists (vector, indexed) or the elements (strided). The END's handle is `GASP_NB_TRIVIAL` when the operation completed inside the call (always for the Blocking forms), `GASP_NB_IMPLICIT` for a pending NBI one.
 *   GASP_START: int target, int shape, size_t runs, size_t n
 *   GASP_END:   int target, int shape, size_t runs, size_t n, gasp_upc_nb_handle_t handle
 */
#define GASP_GEX_VIS_PUT 0x220

/* Initiating a VIS get of `n` bytes from rank `target` (`gex::Team::vector_get_*`, `indexed_get_*`, `strided_get_*`); the arguments as for `GASP_GEX_VIS_PUT`.
 *   GASP_START: int target, int shape, size_t runs, size_t n
 *   GASP_END:   int target, int shape, size_t runs, size_t n, gasp_upc_nb_handle_t handle
 */
#define GASP_GEX_VIS_GET 0x221

/* Initiating a remote atomic operation (`gex_AD_OpNB_*`, `gex_AD_OpNBI_*`) on the `nbytes`-byte object at `target`: `result` is the initiator's output location of a fetching operation (0 for none), `op` the operation (`gex_OP_t`), `dt` the data type (`gex_DT_t`), `operand1` and `operand2` the operands' bits (0 where the operation takes fewer). The END's handle is `GASP_NB_TRIVIAL` when the operation was complete at return.
 *   GASP_START: gasp_upcxx_gptr_t *target, void *result, int op, int dt, uint64_t operand1, uint64_t operand2, size_t nbytes
 *   GASP_END:   gasp_upcxx_gptr_t *target, void *result, int op, int dt, uint64_t operand1, uint64_t operand2, size_t nbytes, gasp_upc_nb_handle_t handle
 */
#define GASP_GEX_AD_OP 0x230

/* Creating an atomic domain over team `team` (`gex_AD_Create`, collective) for the operations `ops` (a bit set of `gex_OP_t`) on data type `dt`, with `flags`.
 *   GASP_START: int team, int dt, int ops, int flags
 *   GASP_END:   int team, int dt, int ops, int flags
 */
#define GASP_GEX_AD_CREATE 0x231

/* Destroying an atomic domain over team `team` (`gex_AD_Destroy`, collective).
 *   GASP_START: int team
 *   GASP_END:   int team
 */
#define GASP_GEX_AD_DESTROY 0x232

#endif /* GASP_UPCXX_H */

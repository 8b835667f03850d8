//! Application kernels against the figures of the layer they are built on:
//! `cargo bench --bench app`.
//!
//! The bench process is the driver: it runs this same executable as a 2-rank job and as
//! a 4-rank job (the same suite; the 4-rank results are suffixed `_4ranks`, as in
//! `coll.rs`), then prints a table and writes `<target>/bench-results/app.json` (see
//! `common/mod.rs`; same format as the other benches).
//!
//! The kernels are the examples' own code, included with `#[path]`: the table of
//! `examples/dht.rs` (`examples/dht/table.rs`), the rod of `examples/stencil.rs`
//! (`examples/stencil/rod.rs`), the update passes of `examples/gups.rs`
//! (`examples/gups/updates.rs`), the SUMMA product of `examples/summa.rs`
//! (`examples/summa/grid.rs`) and the histogram of `examples/histogram.rs`
//! (`examples/histogram/counters.rs`); `app/kernels.rs` holds the figures of the last
//! three and their one-process baselines. Every rank of the job takes part in each
//! kernel figure ([`Bench::collective`]); one operation is the whole kernel on every
//! rank followed by a barrier, and rank 0 times it.
//!
//! | result                      | what                                                  | baseline (target)                   |
//! |-----------------------------|-------------------------------------------------------|-------------------------------------|
//! | `raw.hashmap_insert_rate`   | rank 0 alone: its keys and values stored as the owner stores them (the example's `store`) into a local `FxHashMap`, the dht's own map type, holding them already: the compute floor of an insert | — |
//! | `raw.hashmap_store_alone_rate` | the same stores, each finished before the next starts (an `lfence` after each), as the stores of the dht's RPCs run: the compute floor of an insert in a program | — |
//! | `gex.am_medium_64B_rate`    | rank 0 streams 64-byte Medium requests to polling rank 1 (as in `gex.rs`) | — |
//! | `upcxx.rpc_ff_rate`         | rank 0 streams `rpc_ff(1, f, (seq,))` (as in `upcxx.rs`) | `gex.am_medium_64B_rate` (2 ranks: ≥ 1.0×) |
//! | `upcxx.rpc_inflight_rate`   | rank 0 starts [`INFLIGHT`] round-trip `rpc(1, \|x\| x + 1, (x,))`, then one `when_all` of their futures, and again; per RPC | `upcxx.rpc_ff_rate` (2 ranks: ≥ 0.5×) |
//! | `app.dht_insert`            | every rank inserts its [`KEYS`] keys with the example's `insert` (all in flight, one `when_all`), then a barrier; keys/s over the job | `upcxx.rpc_ff_rate` (2 ranks: ≥ 0.3×) |
//! | `app.dht_find`              | every rank looks its keys up with `find` and checks the values; keys/s over the job | `upcxx.rpc_ff_rate` (2 ranks: ≥ 0.3×) |
//! | `app.stencil`               | [`STEPS`] time steps of the example's rod (4096 points per rank); cell updates/s over the job | — |
//! | `raw.gups_local_rate`       | rank 0 alone: the HPCC stream's updates `T[k] ^= ran` on a local table as large as the job's (2^14 words per rank), placed as the job places them; per update | — |
//! | `app.gups`                  | one pass of the example's updates (4·2^14 per rank) by remote atomic XORs on every rank, then a barrier; updates/s over the job | `raw.gups_local_rate` |
//! | `app.gups_rpc`              | the same pass by the example's batches of `rpc_ff` to the owners; updates/s over the job | `raw.gups_local_rate` |
//! | `raw.matmul_rate`           | rank 0 alone: the example's block multiply-add (192×192 f64), the work of one SUMMA step; flop/s | — |
//! | `app.summa`                 | one SUMMA product on a 1×2 (2 ranks) or 2×2 (4 ranks) grid of 192×192 blocks (2 steps), then a barrier; flop/s over the job | `raw.matmul_rate` |
//! | `raw.histogram_rate`        | rank 0 alone: the example's samples hashed into a local histogram of the same 1000 buckets; per sample | — |
//! | `app.histogram`             | every rank draws 20,000 samples and counts each at its bucket's owner by `rpc_ff` (the example's pass); updates/s over the job | `raw.histogram_rate` |
//!
//! The keys stay in the tables between operations (the first, untimed operation of a
//! figure fills them), so every timed insert replaces a value: the table's size, and
//! so its cache behaviour, is the same in every sample, as for the raw map. The note
//! under the table relates `app.dht_insert` to `raw.hashmap_insert_rate` and to
//! `raw.hashmap_store_alone_rate`, and each kernel to its one-process baseline per rank
//! as well as over the job (the ratio in the table): the share of one process's
//! compute floor that each rank attains. It also gives the rate at which the job's
//! CPUs would insert if messaging cost nothing, each storing keys at
//! `raw.hashmap_store_alone_rate`, as a multiple of `upcxx.rpc_ff_rate`: the most the
//! `app.dht_insert` target can read on this machine (see "Where a store's time goes").
//!
//! All the figures of a job are measured in one group, interleaved as in `gex.rs` (a
//! calibration phase for each, then rounds of one sample of each), so their ratios
//! come from the same stretches of time. A kernel's operation lasts longer than a
//! sample's target time, so each of its samples is one operation.
//!
//! # Where the instructions of an RPC go
//!
//! Instructions, not time, so that the figures hold on a busy machine. Per message,
//! from `examples/rpc_batches.rs` on 2 ranks (batches smaller than a network queue, so
//! no send waits for room and the counts are the same from run to run), under
//! `UPCXX_RANKS=2 valgrind --tool=callgrind --trace-children=yes
//! --toggle-collect='*send_batch*' --toggle-collect='*target_loop*'
//! target/release/examples/rpc_batches 100 MODE`, each rank's inclusive counts divided
//! by the 20,000 messages. Before: each message serialized into a per-thread buffer and
//! copied into the queue slot by `request_medium`; after: serialized straight into the
//! slot by `gex::Team::request_medium_in_place` (a negotiated-payload Medium, inlined).
//!
//! | instructions per message                                              | before | after |
//! |-----------------------------------------------------------------------|-------:|------:|
//! | `am`: gex `request_medium` of 8 bytes, sender (reference)             |    113 |   115 |
//! | `am`: its dispatch on the target, handler included                    |    100 |   100 |
//! | any message: its header checked by the target's poll (`queue::decode`) |     35 |    13 |
//! | `ff`: `rpc_ff(1, f, (seq,))`, sender                                  |    404 |   259 |
//! | — of which the Medium AM (`request_medium`; after: inlined)           |    169 |     — |
//! | `ff`: AM dispatch on the target, copy into the master persona's queue |    235 |   235 |
//! | `ff`: running it in user-level progress (`run_page`)                  |     93 |    92 |
//! | `rt`: `rpc(1, \|x\| x + 1, (x,))`, initiator (reply cell, serialization, AM) |    443 |   293 |
//! | `rt`: target: `run_rpc`, decoding, the call and the reply's send      |    469 |   345 |
//!
//! What an `rpc_ff` costs above the AM it rides on is now the serialization (postcard's
//! varint of a `u64`: about 55) and about 90 of its own: the runtime and rank checks,
//! the seven argument words, the checks and context marks of Prepare/Commit, the
//! serializer's state. On the target an RPC costs three times an AM: its handler
//! copies the message into the master persona's queue (§9.3 ¶6: RPCs run in user-level
//! progress, not in the handler), and user-level progress later runs it from there.
//!
//! RPCs to this rank and the receive side, in the same way (`self`: rank 0 sends the
//! `rpc_ff`s to itself and runs them in its own `target_loop`). Before: a call to self
//! rode a loopback Medium AM like a remote one, the handler's copy into the queue
//! called `memcpy`, and the run copied each header out of the page; after: a call to
//! self is serialized straight into the master persona's queue (`rpc/delivery.rs`), the
//! copy of a message that fits in the page takes a short path without calls, and the
//! run reads the header in the page.
//!
//! | instructions per message                                              | before | after |
//! |-----------------------------------------------------------------------|-------:|------:|
//! | `ff`: `rpc_ff(1, f, (seq,))`, sender                                  |    259 |   261 |
//! | `ff`: AM dispatch on the target, copy into the master persona's queue |    235 |   216 |
//! | — of which the copy (`Queue::push`)                                   |     84 |    64 |
//! | `ff`: running it in user-level progress (`run_page`)                  |     92 |    82 |
//! | `rt`: initiator                                                       |    293 |   302 |
//! | `rt`: target: `run_rpc`, decoding, the call and the reply's send      |    345 |   355 |
//! | `self`: `rpc_ff(0, f, (seq,))`, sending it                            |    259 |   354 |
//! | `self`: the target loop: its poll, the AM's dispatch and copy, the run |    401 |    80 |
//!
//! An `rpc_ff` to self now costs 434 instructions in all instead of 660: the sender
//! serializes into the queue's page (what it saves on the AM it spends on the page's
//! bookkeeping and on the checks that it may communicate, as a send would), and the
//! receive side is the run alone. A remote call's sender and its reply's sender pay a
//! comparison with this rank for it (the 2 to 10 above, the rest of that being code
//! layout). In the `dht` insert phase below (2 ranks, so half the keys are the
//! caller's own), per insert: the AM dispatches on both ranks fall from about 330 to
//! 170–210, while a call to self and its `()` reply cost their sender about 480
//! (`send_to_self`: two string views and an object id serialized into the page, the
//! checks, the reply's delivery); the whole phase, waits for room included, measured
//! 2,216 / 2,560 / 2,913 against 2,407 / 2,573 / 2,599 before: the waits for room
//! (310 to 1,047 of it) vary more than the calls to self save.
//!
//! The whole round trip of `rt`, both ranks, split by function: the same run collected
//! whole (no `--toggle-collect`; the `when_all` and its wait sit outside `send_batch`),
//! each function's inclusive count divided by the 20,000 calls. The wait's polls that
//! find nothing vary from run to run and are left out; every row below is the same in
//! every run. Before: the integer argument and result went through postcard's
//! serializer and deserializer, the function's result was wrapped in a ready future and
//! unwrapped again, the `when_all` walked its futures three times and gave each cell a
//! counted reference to the join, and its completion took each value through the
//! general `take_value`. After: integers take the codec's varint
//! (`serialization/codec/top.rs`), a plain result goes to the reply as it is
//! (`FutureValue::into_value`), one pass joins the cells, which point at the join
//! uncounted, the completion moves each value straight out of its cell, and a value
//! for a cell plainly waiting (no forward state) lands with two stores
//! (`future/when_all.rs`, `future/cell.rs`, whose cells are now one cache line).
//!
//! | instructions per round trip                                           | before | after |
//! |-----------------------------------------------------------------------|-------:|------:|
//! | initiator: `rpc(1, \|x\| x + 1, (x,))`                                |    287 |   274 |
//! | — of which the reply cell's claim                                     |     12 |    12 |
//! | — of which the argument's serialization                               |     50 |    35 |
//! | target: AM dispatch, copy into the master persona's queue             |    215 |   215 |
//! | target: `run_page`: decoding, the call, the reply's send              |    382 |   320 |
//! | — of which the result as a future (`into_ready`)                      |     26 |     — |
//! | — of which the reply's send (`reply`)                                 |    244 |   229 |
//! | initiator: the reply's AM dispatch, handler included                  |    236 |   191 |
//! | — of which its delivery into the cell (`complete_in_cell`)            |     90 |    45 |
//! | initiator: `when_all` of the futures (`join`)                         |     40 |    18 |
//! | initiator: its completion at the next progress (`run_deferred`)       |     48 |    23 |
//! | — of which each value out of its future (`take_value`)                |     29 |     — |
//! | initiator: the futures' drop (`Vec<Future>`)                          |     10 |     0 |
//! | initiator, in all                                                     |    621 |   506 |
//! | target, in all                                                        |    597 |   535 |
//! | the round trip, both ranks                                            |  1,218 | 1,041 |
//!
//! An `rpc_ff` (`ff`, counted as above on the same build) now costs its sender 248 (261
//! before: its sequence number takes the codec's varint) and its target 216 + 88 (82
//! before: the number's decoding, no longer inlined into the run, costs a few more
//! there; in the reply's delivery it costs less): 552 in all, so two of them, one each
//! way, 1,104. The round trip now costs less than that: its sends, the call's and the
//! reply's, cost what an `rpc_ff`'s does (the reply's a little less, with no checks of
//! the caller's arguments), and the delivery into the cell, the join and the values'
//! move into the result together cost the initiator about what running an `rpc_ff`
//! costs its target. Each rank's share is 506 to 535, under twice the 304 of the busier
//! side of an `rpc_ff` stream (its target). Per join, the initiator allocates a few
//! times (the vectors, the join, its completion), never per future
//! (`crates/upcxx/tests/steady_state_alloc.rs`, between processes and to self), and
//! every pass over the futures is one walk of the vector: with 10,000 calls in flight
//! (the figure's; `BATCH` raised for the check) no row grows, the sends then waiting
//! for room in a full queue (about 280 per call on the initiator and 155 on the target,
//! mostly the other side's messages handled meanwhile).
//!
//! **Batches** (`crates/upcxx/src/rpc/batch.rs`). Above, every message was its own
//! AM, and the target of an `rpc_ff` stream spent 216 + 82 instructions per message
//! against the AM's 100: the AM's dispatch and the copy into the queue made the
//! stream's bottleneck. Now the messages a thread sends to a rank between two of its
//! progress calls (after the first, which goes alone) gather into one Medium of up to
//! about 4 KiB, which the target checks and copies into the master persona's queue at
//! once. Counted as above, per message (a flood of `ff` fills about 62 records per
//! AM):
//!
//! | instructions per message                                               | one AM each | batches |
//! |------------------------------------------------------------------------|------------:|--------:|
//! | `ff`: `rpc_ff(1, f, (seq,))`, sender, its share of the batch's AM included |     248 |     278 |
//! | `ff`: target: AM dispatch and copy into the queue (after: the batch's handler) |  216 |      33 |
//! | `ff`: target: running it in user-level progress (`run_page`)           |          82 |      85 |
//! | `rt`: initiator's call, its share of the batch's AM included           |         274 |     298 |
//! | `rt`: target: AM dispatch and copy into the queue                      |         215 |      32 |
//! | `rt`: target: `run_rpc`, decoding, the call and the reply's send       |         320 |     320 |
//!
//! The sender now pays a little more (the record's header, its copy into the slot at
//! the flush), and the target a third of what it paid: the stream's bottleneck moved to
//! the sender. A lone call pays nothing for batches: in a ping-pong of round trips
//! every call and every reply is the first message after a progress, and goes alone.
//! The `dht` insert phase below measured 1,985 instructions per insert with batches
//! (one run), against 2,376–2,613.
//!
//! The replies of `rt` come back in batches too, which the initiator's batch handler
//! delivers record by record: 142 instructions per reply (`rpc_batches 100 rt`, the
//! handler's inclusive count over the 20,000 replies), of which 81 the delivery into
//! the cell. The handler walked each batch twice, once to learn whether it held RPCs
//! only (queued with one copy) and again to deliver; the first walk now stops at the
//! first record that is not an RPC, and the delivery is inlined into the walk: 110.
//! `upcxx.rpc_inflight_rate` read 0.61x `upcxx.rpc_ff_rate` with the machine in its
//! fast state and 0.67-0.72x in its slow one in the first three runs after it
//! (0.54-0.58x and 0.65-0.71x in four before), but 0.42x to 0.50x in the three runs
//! after those: the figure's spread from run to run is wider than the change.
//!
//! The insert phase of the `dht` example (`dht::insert_all`: the RPCs, the `when_all`,
//! the barrier) on 2 ranks with 20,000 keys each, under `UPCXX_RANKS=2 valgrind
//! --tool=callgrind --trace-children=yes --toggle-collect='*insert_all*'
//! target/release/examples/dht 20000` and `callgrind_annotate --inclusive=yes`, both
//! ranks' counts added and divided by the 40,000 inserts, three runs each. Every insert
//! is in flight at once, so sends wait for room in a full queue for a time that varies
//! from run to run (`reserve_waiting`); the other rows are the same in every run.
//! Before: the key and value went through postcard's serializer and deserializer
//! (`core::str::from_utf8` on each), and the object by id was decoded by postcard and
//! looked up in the registry for the wait check and again for the call. After: the
//! codec's own string and varint paths with an ASCII check of a few word loads
//! (`serialization/codec.rs`), and the object of the last call held in hand
//! (`dist_object/by_id.rs`); the example unchanged, its key and value still
//! `by_ref` strings that arrive as `String`s. Views: the example as it is now, its key
//! and value `StrView`s that the owner reads in the message and copies into what it
//! stores (`dht::store`); their coding is inlined into the call's.
//!
//! | instructions per insert                                | before                | after                 | after, views          |
//! |--------------------------------------------------------|----------------------:|----------------------:|----------------------:|
//! | the whole phase                                        | 3,117 / 3,145 / 3,633 | 2,431 / 2,501 / 2,675 | 2,376 / 2,433 / 2,613 |
//! | — of which waiting for room to send (`reserve_waiting`) | 581 / 588 / 1,089    | 574 / 631 / 850       | 576 / 624 / 806       |
//! | sender: the two strings' serialization                 | 206                   | 112                   | inlined               |
//! | sender: the arguments' serialization, object id included | about 280           | 168                   | 129                   |
//! | target: the object's wait check (`wait_until_here`)    | 170                   | 41                    | 41                    |
//! | target: the arguments' decoding (`RpcArgs::decode`)    | 1,061                 | 614                   | 139                   |
//! | — the object by id and the tuple                       | 312                   | 83                    | inlined               |
//! | — the two strings                                      | 749                   | 531                   | inlined               |
//! | —— their UTF-8 check                                   | 212                   | about 30 (inlined)    | about 30 (inlined)    |
//! | target: the two strings' allocation (`malloc`; the map keeps them) | 357       | 357                   | 357                   |
//! | target: the map insert (`HashMap::insert`)             | 237                   | 237                   | 237                   |
//! | target: `store` (lookup, copies, allocation, insert)   | —                     | —                     | 768                   |
//!
//! Every key of this phase is new, so views move its allocations into `store` rather
//! than save them: the owner allocates what it keeps either way, and looks the key up
//! once more before inserting it. What they save is elsewhere: an insert of a key already there (the `app.dht_insert`
//! figure, whose keys stay between operations) copies the value into the old one's
//! buffer and allocates nothing, and a `find` builds no `String` for its key (its phase,
//! under `--toggle-collect='*find_all*'`, one run each: 3,514 instructions per find
//! before, 2,599 after with views, of which 1,095 and 995 waiting for room). The rest
//! of an insert is the two messages (request and reply), the futures and progress.
//!
//! With batches, counted the same way (`dht 20000`, both ranks' counts over the 40,000
//! operations): the find phase took 2,087 instructions per find, of which the delivery
//! of its `Option<String>` reply into the cell took 432 on the initiator (postcard's
//! deserializer, and `core::str::from_utf8` on the value, byte by byte) and the reply's
//! send 545 on the owner (the value's clone and serialization, the batch); a
//! top-level string or option of one now takes the codec's own paths
//! (`serialization/codec/top.rs`), and the delivery costs 332: 1,964 / 1,996 per find
//! in two runs. What remains of a find's reply is the value's two copies, each with its
//! allocation: the clone on the owner (the example returns the value it keeps) and the
//! `String` on the initiator (the result is serialized and deserialized, §9.1 ¶25,
//! even for a call to this rank). The insert phase took 1,987 per insert, 135 of them
//! in the example's `owner`, an FNV-1a hash of the key byte by byte; it now hashes the
//! key with the Fx hash and a finalizer, 32 instructions: 1,905 per insert.
//!
//! **Time, not instructions.** Sampled by the clock (`perf record -e cpu-clock`, 2
//! ranks inserting their 100,000 keys again and again, as the figure does), the insert
//! phase spent about a third of its samples in the map's lookup (`HashMap::get_mut`,
//! more per key than the raw loop's whole store; presumably cache misses, which the raw
//! loop's independent lookups overlap and lookups far apart in message handlers
//! cannot) and about 15% in `sched_yield`: a rank waiting for room in its
//! peer's network queue (`reserve_waiting`) or for its replies, while the peer ran a
//! drain of thousands of queued RPCs without polling. A drain now polls the network
//! every 128 RPCs (`rpc/delivery.rs`): in alternating runs of the same binary, the
//! example inserted 20-45% more keys per second and found 25-45% more; in the table
//! (runs with `upcxx.rpc_ff_rate` at about 41 M msg/s), `app.dht_insert` went from 4.2
//! to 5.5 M keys/s and `app.dht_find` from 3.4 to 4.4 M on 2 ranks, and on 4 from 3.6
//! to 4.0-4.9 M and from 2.8 to 3.2-3.9 M (five runs). `upcxx.rpc_inflight_rate` read
//! 0.51x and 0.61x `upcxx.rpc_ff_rate` on 2 ranks in two runs after it (0.64x in one
//! before; spreads about 40%), and 0.51-0.64x on 4 ranks in five.
//!
//! **Where a store's time goes.** Sampled the same way (both ranks inserting, then
//! finding, their 100,000 keys 40 times), the map's two lookups, the insert's
//! `get_mut` and the find's (inlined into its RPC's function), took 43% of all
//! samples, and 79-83% of each lookup's samples fall on one instruction: the first
//! load from the bucket that the control bytes point at (the key's length, compared
//! before its bytes), a cache miss. The raw loop pays the same misses but overlaps
//! them, one store's with the next's. Stores each finished before the next starts
//! (`raw.hashmap_store_alone_rate`) ran at 5.3-5.7 M keys/s, against 10-12 M for the
//! loop, and at the same rate on both ranks at once, so the two ranks' tables do not
//! crowd each other out of the shared cache. A store in an RPC is such a store:
//! hundreds of instructions of messaging lie between two of them. So with 2 ranks on
//! 2 CPUs, the stores alone bound the insert at twice that rate, about 11.5 M keys/s:
//! 0.295x `upcxx.rpc_ff_rate` in a run where it read 38.9 M msg/s (the note under the
//! table gives this bound in every run). The 0.3x target is out of reach on this
//! machine whatever messaging costs, whenever the RPC layer runs that fast; when the
//! machine is in its slower state (`rpc_ff_rate` about 21 M msg/s) the bound is about
//! 0.55x and the insert reads 0.22-0.25x. In that run `app.dht_insert` read 5.1 M
//! keys/s, 0.889x one CPU's store-alone rate: each key cost the job's two CPUs about
//! 390 ns, of which its store took about 175 and the messaging, the futures and the
//! waits the rest.
//!
//! A map that keeps the key and value in its bucket (no pointer to chase to compare
//! the key or overwrite the value) does not help: with `SmallVec<[u8; 32]>` keys and
//! `SmallVec<[u8; 24]>` values, which hold these strings inline (88-byte buckets
//! against 48), the stores alone ran at 0.74-0.94x the `String` map's rate in ten of
//! eleven alternating rounds and 1.11x in one (one process, rank 0's 100,000 keys, an
//! `lfence` after each store), and asking glibc for transparent huge pages
//! (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`) changed neither. The miss on the bucket
//! itself, which every layout pays, is what the store waits for.
//!
//! **Floods that wait for each other.** Both ranks of the insert send their 100,000
//! calls before their first progress. Once a rank's Request queue at its peer is full,
//! it waits for room, polling, and so takes in the peer's batches as they come: the
//! peer's sends never wait, so the peer never polled, and the first rank waited until
//! the peer's flood ended. Sampled by the clock with the example's call made empty (the
//! same arguments, a function that only reads them), a fifth of the job's samples
//! fell in those waits (`sched_yield`, `reserve_waiting`, the scheduler), and the same
//! calls ran at 6.6-8.2 M/s with all 100,000 in flight against 10-11 M/s 2,000 at a
//! time. A thread's calls now poll after every eighth batch they send (`rpc/batch.rs`,
//! `flush_from_call`): 9.4-10.1 M/s all in flight (six alternating runs; a poll after
//! every batch, 8.7-11.3). In four alternating pairs of runs of this bench (the
//! machine's state moves from run to run, and every figure with it: compare within a
//! pair), `app.dht_insert` on 2 ranks read 3.1-3.7 M keys/s before and 3.3-4.4 M
//! after, and `app.dht_find` 2.6-3.1 and 2.9-3.7 M, both higher in every pair; on 4
//! ranks the insert read 3.1-3.8 and 3.4-4.0 M. `upcxx.rpc_ff_rate` read 23.9-24.9 M
//! msg/s before and 20.1-25.6 after (with a poll after every batch, 25.1-25.6 against
//! 23.5-26.4 in three other pairs), so the insert's ratio to it, 0.129-0.150x before
//! and 0.159-0.217x after, rose more than the insert did. The streams of `rpc_ff`s
//! `app.gups_rpc` and `app.histogram` moved within their noise (a poll after every
//! batch cost `app.gups_rpc` about 4%). What is left of an insert is mostly the map:
//! in the same sampling of the real insert, `HashMap::get_mut` and
//! its key comparison took 36% of the job's samples.
//!
//! **Where an atomic update's instructions go.** One update of `app.gups` is a
//! `bit_xor_with` of the example's `AtomicDomain<u64>` on a word mapped here, with an
//! `operation_cx::as_promise` of the pass's one promise. Counted under `UPCXX_RANKS=2
//! valgrind --tool=callgrind --trace-children=yes --toggle-collect='*Atomics*pass*'
//! target/release/examples/gups 14`, one rank's count over its 131,072 updates (two
//! passes), the barriers included (a few thousand instructions in all):
//!
//! | step                                                                  | instructions per update |
//! |-----------------------------------------------------------------------|------------------------:|
//! | before: `initiate` (the checks and the CPU atomic) 113, the promise's arming 28, its notification (`thread::notify_satisfy`) 100 | 323 |
//! | the notification counted beside the queue's last entry: 33            |                     257 |
//! | `initiate` inlined into the operation                                 |                     206 |
//! | the promise's readiness read from its state                           |                     168 |
//! | the notification's fast path inlined into the completion              |                     157 |
//!
//! Before: `initiate` stayed out of line (the compiler found it too large), so each
//! operation matched on its `AtomicOp` at run time to name the call, find the gex op
//! and check the order and the domain's set; arming checked that the promise was not
//! ready by making a future of it (a counted reference and a handle, given back at
//! once), before the call's checks and again when armed; and every completion reached
//! the thread's queue of deferred notifications to add one to the count of its last
//! entry. After: `initiate` is inlined, so a constant operation and order fold those
//! checks away; the promise reads its state's flag; and the thread's const state
//! remembers the last entry's promise and epoch, so that a completion into the same
//! promise is a compare and an increment (`thread::defer_satisfy`), inlined into the
//! operation. In one run of the bench before and one at 168 instructions (2 ranks,
//! `upcxx.rpc_ff_rate` 25.3 and 24.1 M msg/s):
//! `app.gups` 26.8 M updates/s (0.65x `app.gups_rpc`) before, 46.1 M (1.06x) after;
//! on 4 ranks 25.4 M (0.93x) and 48.0 M (1.55x).
//!
//! Data is checked: `app.dht_find` checks every value it finds (so it also checks the
//! inserts), the stencil's rod is compared with a serial run after its first
//! operation, the SUMMA product with the serial one after the first operation and the
//! last, and after the measurement the GUPS tables (local and distributed, given one
//! more pass if they took an odd number) must be back at their start and the
//! histograms (local and distributed) must hold every sample drawn, bucket by bucket;
//! `raw.matmul_rate` checks its block after every run; `upcxx.rpc_ff_rate` and
//! `upcxx.rpc_inflight_rate` check every message and result, the Medium stream its
//! payloads.

mod common;
#[path = "../examples/histogram/counters.rs"]
mod counters;
#[path = "../examples/dht/table.rs"]
mod dht;
#[path = "../examples/summa/grid.rs"]
mod grid;
#[path = "app/kernels.rs"]
mod kernels;
#[path = "../examples/stencil/rod.rs"]
mod rod;
#[path = "../examples/gups/updates.rs"]
mod updates;

use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;
use std::time::Duration;

use common::figures::{self, Bench, Unit};
use common::{time_iters, Measured, RankJob, Report, Sampler, TargetIs};
use rustc_hash::FxHashMap;
use upcxx::{GlobalPtr, Rank};

const BENCH: &str = "app";
const JOB: &str = "app";
/// The jobs: 2 ranks and 4 ranks.
const JOBS: [usize; 2] = [2, 4];
/// Each rank's shared segment (UPC++ takes all of it for its heap).
const SEGMENT: usize = 32 << 20;
/// Keys each rank inserts and finds.
const KEYS: u64 = 100_000;
/// Round-trip RPCs in flight at once in `upcxx.rpc_inflight_rate`.
const INFLIGHT: usize = 10_000;
/// Time steps of the rod per `app.stencil` operation.
const STEPS: usize = 100;
/// Each collective figure's control words (the total, then the phases ended) sit in a
/// pair of cache lines of rank 0's segment.
const CTRL_STRIDE: usize = 128;
const KERNELS: usize = 7;

/// Rank 0's control words, for the other ranks to ask for.
static CONTROL: OnceLock<GlobalPtr<u64>> = OnceLock::new();

/// Rank 0's control words.
fn control() -> GlobalPtr<u64> {
    *CONTROL.get().expect("set before the barrier")
}

/// A u64 of some rank's segment as an atomic, through this process's mapping.
fn word(gp: GlobalPtr<u64>) -> &'static AtomicU64 {
    let p = gp.local();
    assert!(!p.is_null() && p as usize & 7 == 0);
    // SAFETY: an 8-byte aligned word of a segment (mapped for the life of the process)
    // that the figures only access through atomics.
    unsafe { &*(p as *const AtomicU64) }
}

/// The control words of kernel figure `k`.
fn slot(base: GlobalPtr<u64>, k: usize) -> (&'static AtomicU64, &'static AtomicU64) {
    assert!(k < KERNELS);
    let at = |off: usize| word(base.add(off / 8));
    (at(k * CTRL_STRIDE), at(k * CTRL_STRIDE + 64))
}

fn rank_main(job: RankJob) {
    upcxx::init();
    let team = upcxx::backend::gex_team();
    team.endpoint()
        .register_handlers(&mut common::am::handlers())
        .expect("register the bench's gex handlers");
    let rank = upcxx::rank_me();
    if rank == 0 {
        let gp = upcxx::allocate(KERNELS * CTRL_STRIDE, CTRL_STRIDE)
            .expect("segment space for the control words")
            .cast::<u64>();
        // SAFETY: a fresh block of our segment that nobody else knows yet.
        unsafe { std::ptr::write_bytes(gp.local(), 0, KERNELS * CTRL_STRIDE / 8) };
        CONTROL.set(gp).expect("set once");
    }
    upcxx::barrier(); // handlers registered and control words published
    let base = upcxx::rpc(0, control, ()).wait();
    let sampler = Sampler::from_env();

    // Kept for the rest of the job, as the figures are.
    let map: &'static dht::Map = Box::leak(Box::new(dht::new_map()));
    let pairs: &'static [(String, String)] = dht::pairs(rank, KEYS).leak();
    let rod = Rc::new(RefCell::new(rod::Rod::new()));
    let more = kernels::Kernels::new();
    upcxx::barrier();

    let mut figures = vec![
        hashmap_insert_rate(rank),
        hashmap_store_alone_rate(rank),
        figures::am_medium_rate("gex.am_medium_64B_rate", team),
        common::rpc::rpc_ff_rate("upcxx.rpc_ff_rate", team),
        common::rpc::rpc_inflight_rate("upcxx.rpc_inflight_rate", team, INFLIGHT),
        dht_insert(rank, slot(base, 0), map, pairs),
        dht_find(rank, slot(base, 1), map, pairs),
        stencil(rank, slot(base, 2), Rc::clone(&rod)),
    ];
    figures.extend(more.figures(rank, std::array::from_fn(|k| slot(base, 3 + k))));
    let results: Vec<Measured> = figures::measure(rank, sampler, upcxx::barrier, figures);
    more.check();
    if rank == 0 {
        common::write_rank_results(&job, &results);
    }
    let rod = Rc::into_inner(rod).expect("the figures are gone");
    rod.into_inner().free();
    upcxx::finalize();
}

/// `raw.hashmap_insert_rate`: rank 0's own keys and values, stored by the example's
/// `store` into a local map of the dht's type that holds them already; per key.
fn hashmap_insert_rate(rank: Rank) -> Bench<'static> {
    hashmap_stores(rank, "raw.hashmap_insert_rate", || {})
}

/// `raw.hashmap_store_alone_rate`: the stores of `raw.hashmap_insert_rate`, each
/// finished before the next starts, as the stores of the `dht`'s RPCs are: between two
/// of them run hundreds of instructions of messaging, more than the processor looks
/// ahead, so the cache misses of one store (its bucket, then the key's bytes) cannot
/// overlap the next store's, as they do in a loop of stores. An `lfence` after each
/// store keeps the next from starting (x86-64; elsewhere a full fence, which orders
/// the memory accesses as well).
fn hashmap_store_alone_rate(rank: Rank) -> Bench<'static> {
    hashmap_stores(rank, "raw.hashmap_store_alone_rate", || {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `lfence` has no preconditions (SSE2, part of x86-64).
        unsafe {
            std::arch::x86_64::_mm_lfence()
        };
        #[cfg(not(target_arch = "x86_64"))]
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    })
}

/// Rank `rank`'s keys and values stored one per iteration by the example's `store`
/// into a local map of the dht's type that holds them already, `after` run after each.
fn hashmap_stores(rank: Rank, name: &str, after: fn()) -> Bench<'static> {
    let pairs = dht::pairs(rank, KEYS);
    let mut map: FxHashMap<String, String> = FxHashMap::default();
    let mut next = 0usize;
    Bench::solo(name, Unit::Rate("keys/s"), move |iters| {
        if map.is_empty() {
            for (k, v) in &pairs {
                dht::store(&mut map, k, v);
            }
        }
        let t = time_iters(iters, || {
            let (k, v) = &pairs[next];
            dht::store(black_box(&mut map), k, v);
            after();
            next = (next + 1) % pairs.len();
        });
        assert_eq!(map.len(), pairs.len(), "the local map lost keys");
        t
    })
}

/// Keys inserted or found per operation over the job.
fn job_keys() -> usize {
    KEYS as usize * upcxx::rank_n() as usize
}

/// `app.dht_insert`: every rank inserts all its keys (all in flight, one `when_all`),
/// then a barrier.
fn dht_insert(
    rank: Rank,
    control: (&'static AtomicU64, &'static AtomicU64),
    map: &'static dht::Map,
    pairs: &'static [(String, String)],
) -> Bench<'static> {
    kernel(
        rank,
        control,
        "app.dht_insert",
        Unit::ItemRate("keys/s", job_keys()),
        move |_| dht::insert_all(map, pairs),
    )
}

/// `app.dht_find`: every rank looks all its keys up and checks the values, then a
/// barrier.
fn dht_find(
    rank: Rank,
    control: (&'static AtomicU64, &'static AtomicU64),
    map: &'static dht::Map,
    pairs: &'static [(String, String)],
) -> Bench<'static> {
    kernel(
        rank,
        control,
        "app.dht_find",
        Unit::ItemRate("keys/s", job_keys()),
        move |_| {
            let values = dht::find_all(map, pairs);
            let wrong = pairs
                .iter()
                .zip(&values)
                .filter(|((_, want), got)| got.as_deref() != Some(want.as_str()))
                .count();
            assert_eq!(wrong, 0, "dht: {wrong} keys have a wrong or missing value");
        },
    )
}

/// `app.stencil`: [`STEPS`] steps of the rod, then a barrier; rank 0 verifies the rod
/// after the first operation (while the other ranks wait for the next).
fn stencil(
    rank: Rank,
    control: (&'static AtomicU64, &'static AtomicU64),
    rod: Rc<RefCell<rod::Rod>>,
) -> Bench<'static> {
    kernel(
        rank,
        control,
        "app.stencil",
        Unit::ItemRate("cells/s", STEPS * rod::Rod::points()),
        move |j| {
            rod.borrow_mut().steps(STEPS);
            upcxx::barrier();
            if j == 0 && rank == 0 {
                rod.borrow().verify();
            }
        },
    )
}

/// A kernel figure: every rank runs `op(j)` for the same `j` ([`Bench::collective`]).
fn kernel(
    rank: Rank,
    control: (&'static AtomicU64, &'static AtomicU64),
    name: &str,
    unit: Unit,
    op: impl FnMut(u64) + 'static,
) -> Bench<'static> {
    Bench::collective(rank, control, name, unit, || {}, op)
}

// ---------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------

/// The kernels related to their one-process baselines: (figure, baseline).
const ONE_PROCESS: [(&str, &str); 4] = [
    ("app.gups", "raw.gups_local_rate"),
    ("app.gups_rpc", "raw.gups_local_rate"),
    ("app.summa", "raw.matmul_rate"),
    ("app.histogram", "raw.histogram_rate"),
];

/// The suffix of the results of a job of `ranks` ranks.
fn suffix(ranks: usize) -> String {
    if ranks > 2 {
        format!("_{ranks}ranks")
    } else {
        String::new()
    }
}

fn driver() -> i32 {
    let machine = common::machine_note();
    let sampler = Sampler::from_env();
    eprintln!(
        "app bench: a 2-rank and a 4-rank job; {} samples of ~{} ms per figure; {machine}",
        sampler.samples,
        sampler.sample_time.as_millis()
    );
    let timeout = Duration::from_secs(600);
    let mut report = Report::new(BENCH, 2);
    for ranks in JOBS {
        let sfx = suffix(ranks);
        match common::run_job(BENCH, JOB, ranks, SEGMENT, timeout) {
            Ok(results) => report.add(results.into_iter().map(|mut m| {
                m.name.push_str(&sfx);
                m
            })),
            Err(e) => report.errors.push(e),
        }
    }

    let mut notes = Vec::new();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for ranks in JOBS {
        let sfx = suffix(ranks);
        let target = |t: f64| (ranks == 2).then_some((t, TargetIs::Min));
        let ff = format!("upcxx.rpc_ff_rate{sfx}");
        report.relate(&ff, &format!("gex.am_medium_64B_rate{sfx}"), target(1.0));
        report.relate(&format!("upcxx.rpc_inflight_rate{sfx}"), &ff, target(0.5));
        report.relate(&format!("app.dht_insert{sfx}"), &ff, target(0.3));
        report.relate(&format!("app.dht_find{sfx}"), &ff, target(0.3));
        // Each application kernel against its one-process baseline.
        for (app, raw) in ONE_PROCESS {
            report.relate(&format!("{app}{sfx}"), &format!("{raw}{sfx}"), None);
        }
        let dht = [
            ("app.dht_insert", "raw.hashmap_insert_rate"),
            ("app.dht_insert", "raw.hashmap_store_alone_rate"),
        ];
        for (app, raw) in dht.into_iter().chain(ONE_PROCESS) {
            if let (Some(x), Some(base)) = (
                report.value_of(&format!("{app}{sfx}")),
                report.value_of(&format!("{raw}{sfx}")),
            ) {
                notes.push(format!(
                    "{ranks} ranks: {app} is {:.3}x {raw} ({:.3}x per rank)",
                    x / base,
                    x / base / ranks as f64
                ));
            }
        }
        // What the stores alone allow: every processor storing keys at the rate of a
        // store run alone, as if messaging cost nothing.
        if let (Some(alone), Some(ff_rate)) = (
            report.value_of(&format!("raw.hashmap_store_alone_rate{sfx}")),
            report.value_of(&ff),
        ) {
            let busy = ranks.min(cpus);
            notes.push(format!(
                "{ranks} ranks: with free messaging, the stores alone would bound \
                 app.dht_insert at {busy} x raw.hashmap_store_alone_rate (one per CPU at \
                 work) = {:.3}x {ff}",
                busy as f64 * alone / ff_rate
            ));
        }
    }
    report.finish(
        &format!(
            "app benchmarks: every rank of a 2-rank job (*_4ranks: of a 4-rank job) in each \
             kernel, timed at rank 0; baselines between ranks 0 and 1 of the same job; {machine}"
        ),
        &notes,
    )
}

fn main() {
    if let Some(job) = common::rank_job(JOB) {
        rank_main(job);
        return;
    }
    std::process::exit(driver());
}

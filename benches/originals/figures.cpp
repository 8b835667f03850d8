// The figures of the `app`, `upcxx` and `mpi` benches that UPC++ itself can measure,
// measured by UPC++ (the C++ library this project reimplements) on GASNet-EX, the same
// way and under the same names, so that the two can be compared on one machine. Built
// and run by `run.sh` in this directory; see it for what each run means.
//
// Each figure is the median of 7 samples. Rank 1 serves (user-level progress) while
// rank 0 measures, except in the dht figures, where both ranks insert and look up.
#include <upcxx/upcxx.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

constexpr int SAMPLES = 7;

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Rank 1's side of a figure only rank 0 acts in: progress until rank 0 says stop.
bool stop_serving = false;
void serve() {
  while (!stop_serving) upcxx::progress();
  stop_serving = false;
}
void stop_peer() {
  upcxx::rpc(1, []() { stop_serving = true; }).wait();
}

// Runs `sample` (rank 0, returning its figure) SAMPLES times while rank 1 serves;
// prints the median.
template <typename Sample>
void duo(const char *name, const char *unit, Sample sample) {
  std::vector<double> samples;
  for (int s = 0; s < SAMPLES; s++) {
    upcxx::barrier();
    if (upcxx::rank_me() == 0) {
      samples.push_back(sample());
      stop_peer();
    } else {
      serve();
    }
  }
  if (upcxx::rank_me() == 0) std::printf("%-28s %14.1f %s\n", name, median(samples), unit);
}

uint64_t ff_received = 0;

// The dht example's keys and values (examples/dht/table.rs, `pairs`).
struct Rng {
  uint64_t s;
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dULL;
  }
};

std::vector<std::pair<std::string, std::string>> pairs(int rank, uint64_t n) {
  Rng rng{0x9e3779b97f4a7c15ULL ^ (uint64_t(rank + 1) * 0x123456789abcdef1ULL)};
  std::vector<std::pair<std::string, std::string>> out;
  char buf[64];
  for (uint64_t i = 0; i < n; i++) {
    uint64_t r = rng.next();
    std::snprintf(buf, sizeof buf, "key-%d-%lu-%lx", rank, (unsigned long)i, (unsigned long)r);
    std::string key = buf;
    std::snprintf(buf, sizeof buf, "value-%lx", (unsigned long)((r << 17) | (r >> 47)));
    out.emplace_back(key, std::string(buf));
  }
  return out;
}

// The UPC++ Programmer's Guide's distributed hash table, a value stored under a key
// already there replacing the old one (as the Rust example's `store` does).
using Map = upcxx::dist_object<std::unordered_map<std::string, std::string>>;

int owner(const std::string &key) {
  return int(std::hash<std::string>{}(key) % upcxx::rank_n());
}

void dht(uint64_t keys) {
  Map map({});
  auto mine = pairs(upcxx::rank_me(), keys);
  std::vector<double> inserts, finds;
  // The first round fills the table and is not counted, as in the `app` bench.
  for (int s = 0; s <= SAMPLES; s++) {
    upcxx::barrier();
    double t0 = now();
    upcxx::future<> all = upcxx::make_future();
    for (auto &kv : mine) {
      all = upcxx::when_all(
          all, upcxx::rpc(
                   owner(kv.first),
                   [](Map &m, const std::string &key, const std::string &value) {
                     m->insert_or_assign(key, value);
                   },
                   map, kv.first, kv.second));
    }
    all.wait();
    upcxx::barrier();
    double inserted = now() - t0;
    t0 = now();
    upcxx::future<> found = upcxx::make_future();
    for (auto &kv : mine) {
      const std::string *want = &kv.second;
      found = upcxx::when_all(
          found, upcxx::rpc(
                     owner(kv.first),
                     [](Map &m, const std::string &key) {
                       auto at = m->find(key);
                       return at == m->end() ? std::string() : at->second;
                     },
                     map, kv.first)
                     .then([want](const std::string &v) {
                       if (v != *want) std::abort();
                     }));
    }
    found.wait();
    upcxx::barrier();
    double looked_up = now() - t0;
    if (s > 0) {
      inserts.push_back(double(upcxx::rank_n() * keys) / inserted);
      finds.push_back(double(upcxx::rank_n() * keys) / looked_up);
    }
  }
  if (upcxx::rank_me() == 0) {
    std::printf("%-28s %14.1f keys/s\n", "app.dht_insert", median(inserts));
    std::printf("%-28s %14.1f keys/s\n", "app.dht_find", median(finds));
  }
}

}  // namespace

int main() {
  upcxx::init();
  if (upcxx::rank_n() != 2) {
    if (upcxx::rank_me() == 0) std::fprintf(stderr, "figures: run on 2 ranks\n");
    upcxx::finalize();
    return 1;
  }
  // A word of rank 1's shared segment for the transfers.
  upcxx::dist_object<upcxx::global_ptr<uint64_t>> word(upcxx::new_<uint64_t>(0));
  upcxx::global_ptr<uint64_t> remote = word.fetch(1).wait();

  duo("upcxx.rpc_roundtrip", "ns", [] {
    const int n = 20000;
    double t0 = now();
    for (int i = 0; i < n; i++) {
      uint64_t got = upcxx::rpc(1, [](uint64_t x) { return x + 1; }, uint64_t(i)).wait();
      if (got != uint64_t(i) + 1) std::abort();
    }
    return (now() - t0) / n * 1e9;
  });
  duo("upcxx.rput_8B", "ns", [remote] {
    const int n = 20000;
    double t0 = now();
    for (int i = 0; i < n; i++) upcxx::rput(uint64_t(i), remote).wait();
    if (upcxx::rget(remote).wait() != uint64_t(n - 1)) std::abort();
    return (now() - t0) / n * 1e9;
  });
  duo("upcxx.rget_8B", "ns", [remote] {
    const int n = 20000;
    double t0 = now();
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) sum += upcxx::rget(remote).wait();
    if (sum != uint64_t(n) * upcxx::rget(remote).wait()) std::abort();
    return (now() - t0) / n * 1e9;
  });
  duo("upcxx.rpc_ff_rate", "msg/s", [] {
    const uint64_t n = 300000;
    double t0 = now();
    for (uint64_t i = 0; i < n; i++) upcxx::rpc_ff(1, [](uint64_t) { ff_received++; }, i);
    uint64_t got = upcxx::rpc(1, []() {
                     uint64_t g = ff_received;
                     ff_received = 0;
                     return g;
                   }).wait();
    if (got != n) std::abort();
    return double(n) / (now() - t0);
  });
  duo("upcxx.rpc_inflight_rate", "msg/s", [] {
    const int batch = 10000, batches = 10;
    double t0 = now();
    for (int b = 0; b < batches; b++) {
      upcxx::future<> all = upcxx::make_future();
      for (int i = 0; i < batch; i++) {
        uint64_t x = uint64_t(b) * batch + i;
        all = upcxx::when_all(all, upcxx::rpc(1, [](uint64_t x) { return x + 1; }, x)
                                       .then([x](uint64_t y) {
                                         if (y != x + 1) std::abort();
                                       }));
      }
      all.wait();
    }
    return double(batch) * batches / (now() - t0);
  });
  dht(100000);
  upcxx::barrier();
  upcxx::finalize();
  return 0;
}

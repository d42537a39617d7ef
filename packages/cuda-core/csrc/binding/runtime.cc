// Runtime functions: probe, device info, memory, copies, stream sync, events and CUDA graphs.
#include <mutex>
#include <unordered_map>

#include "../kernels/copy.h"
#include "args.h"
#include "registry.h"

namespace qk::binding {
namespace {

Napi::Value Probe(const Napi::CallbackInfo& info) {
  const ProbeResult r = probe();
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("runtimeVersion", r.runtime_version);
  o.Set("driverVersion", r.driver_version);
  o.Set("deviceCount", r.device_count);
  if (r.error == cudaSuccess) {
    o.Set("error", env.Null());
  } else {
    o.Set("error", Napi::String::New(env, cudaGetErrorName(r.error)));
    o.Set("errorMessage", Napi::String::New(env, cudaGetErrorString(r.error)));
    o.Set("stage", Napi::String::New(env, r.stage));
  }
  return o;
}

Napi::Value DeviceInfo(const Napi::CallbackInfo& info) {
  return guard(info, "deviceInfo", [](const Args& a) -> Napi::Value {
    Context& ctx = Context::get();
    const cudaDeviceProp& p = ctx.props();
    size_t free_b = 0, total_b = 0;
    QK_CUDA_TRY("deviceInfo", cudaMemGetInfo(&free_b, &total_b));
    int driver = 0, runtime = 0, bus_width = 0, mem_clock = 0;
    QK_CUDA_TRY("deviceInfo", cudaDriverGetVersion(&driver));
    QK_CUDA_TRY("deviceInfo", cudaRuntimeGetVersion(&runtime));
    QK_CUDA_TRY("deviceInfo", cudaDeviceGetAttribute(&bus_width, cudaDevAttrGlobalMemoryBusWidth, ctx.device()));
    QK_CUDA_TRY("deviceInfo", cudaDeviceGetAttribute(&mem_clock, cudaDevAttrMemoryClockRate, ctx.device()));
    Napi::Env env = a.env();
    Napi::Object o = Napi::Object::New(env);
    o.Set("index", ctx.device());
    o.Set("name", Napi::String::New(env, p.name));
    o.Set("computeCapability", Napi::String::New(env, std::to_string(p.major) + "." + std::to_string(p.minor)));
    o.Set("multiProcessors", p.multiProcessorCount);
    o.Set("totalMemoryBytes", static_cast<double>(total_b));
    o.Set("freeMemoryBytes", static_cast<double>(free_b));
    o.Set("l2CacheBytes", p.l2CacheSize);
    o.Set("sharedMemoryPerBlockOptinBytes", static_cast<double>(p.sharedMemPerBlockOptin));
    o.Set("memoryBusWidthBits", bus_width);
    o.Set("memoryClockKHz", mem_clock);
    o.Set("driverVersion", driver);
    o.Set("runtimeVersion", runtime);
    return o;
  });
}

Napi::Value Malloc(const Napi::CallbackInfo& info) {
  return guard(info, "malloc", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    const int64_t bytes = a.int64(0, "bytes", 0, INT64_MAX / 2);
    Context::get();  // the device must be current before the first cudaMalloc
    void* p = allocator().allocate(static_cast<size_t>(bytes), "malloc");
    return Napi::BigInt::New(a.env(), static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)));
  });
}

Napi::Value Free(const Napi::CallbackInfo& info) {
  return guard(info, "free", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    allocator().release(a.ptr(0, "ptr"));
    return a.env().Undefined();
  });
}

/** (ptr, bytes, offset) of a typed array or ArrayBuffer view argument. */
std::pair<uint8_t*, size_t> host_view(const Args& a, const Napi::Value& v, const char* name) {
  if (!v.IsTypedArray() && !v.IsDataView()) a.fail(name, "must be a typed array");
  if (v.IsTypedArray()) {
    Napi::TypedArray t = v.As<Napi::TypedArray>();
    return {static_cast<uint8_t*>(t.ArrayBuffer().Data()) + t.ByteOffset(), t.ByteLength()};
  }
  Napi::DataView d = v.As<Napi::DataView>();
  return {static_cast<uint8_t*>(d.ArrayBuffer().Data()) + d.ByteOffset(), d.ByteLength()};
}

Napi::Value CopyToDevice(const Napi::CallbackInfo& info) {
  return guard(info, "copyToDevice", [&info](const Args& a) -> Napi::Value {
    a.expect_count(2);
    void* dst = a.ptr(0, "dst");
    auto [src, bytes] = host_view(a, info[1], "src");
    a.check_range(dst, bytes, "dst");
    QK_CUDA_TRY("copyToDevice", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
    QK_CUDA_TRY("copyToDevice", cudaStreamSynchronize(stream()));
    return a.env().Undefined();
  });
}

Napi::Value CopyToHost(const Napi::CallbackInfo& info) {
  return guard(info, "copyToHost", [&info](const Args& a) -> Napi::Value {
    a.expect_count(2);
    auto [dst, bytes] = host_view(a, info[0], "dst");
    const void* src = a.ptr(1, "src");
    a.check_range(src, bytes, "src");
    QK_CUDA_TRY("copyToHost", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
    QK_CUDA_TRY("copyToHost", cudaStreamSynchronize(stream()));
    return a.env().Undefined();
  });
}

Napi::Value CopyDeviceToDevice(const Napi::CallbackInfo& info) {
  return guard(info, "copyDeviceToDevice", [](const Args& a) -> Napi::Value {
    a.expect_count(3);
    void* dst = a.ptr(0, "dst");
    const void* src = a.ptr(1, "src");
    const auto bytes = static_cast<size_t>(a.int64(2, "bytes"));
    a.check_range(dst, bytes, "dst");
    a.check_range(src, bytes, "src");
    QK_CUDA_TRY("copyDeviceToDevice", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
    return a.env().Undefined();
  });
}

Napi::Value CopyKernel(const Napi::CallbackInfo& info) {
  return guard(info, "copyKernel", [](const Args& a) -> Napi::Value {
    a.expect_count(3);
    void* dst = a.ptr(0, "dst");
    const void* src = a.ptr(1, "src");
    const auto bytes = static_cast<size_t>(a.int64(2, "bytes"));
    a.check_range(dst, bytes, "dst");
    a.check_range(src, bytes, "src");
    launched("copyKernel", launch_copy(dst, src, bytes, stream()));
    return a.env().Undefined();
  });
}

Napi::Value Memset(const Napi::CallbackInfo& info) {
  return guard(info, "memset", [](const Args& a) -> Napi::Value {
    a.expect_count(3);
    void* dst = a.ptr(0, "dst");
    const int64_t value = a.int64(1, "value", 0, 255);
    const auto bytes = static_cast<size_t>(a.int64(2, "bytes"));
    a.check_range(dst, bytes, "dst");
    QK_CUDA_TRY("memset", cudaMemsetAsync(dst, static_cast<int>(value), bytes, stream()));
    return a.env().Undefined();
  });
}

Napi::Value MemoryStatsFn(const Napi::CallbackInfo& info) {
  return guard(info, "memoryStats", [](const Args& a) -> Napi::Value {
    const MemoryStats s = allocator().stats();
    Napi::Object o = Napi::Object::New(a.env());
    o.Set("allocatedBytes", static_cast<double>(s.allocated_bytes));
    o.Set("reservedBytes", static_cast<double>(s.reserved_bytes));
    o.Set("peakAllocatedBytes", static_cast<double>(s.peak_allocated_bytes));
    o.Set("cudaMallocCalls", static_cast<double>(s.cuda_malloc_calls));
    o.Set("cacheHits", static_cast<double>(s.cache_hits));
    o.Set("liveBlocks", static_cast<double>(s.live_blocks));
    return o;
  });
}

Napi::Value EmptyCache(const Napi::CallbackInfo& info) {
  return guard(info, "emptyCache", [](const Args& a) -> Napi::Value {
    allocator().empty_cache();
    return a.env().Undefined();
  });
}

Napi::Value Synchronize(const Napi::CallbackInfo& info) {
  return guard(info, "synchronize", [](const Args& a) -> Napi::Value {
    QK_CUDA_TRY("synchronize", cudaStreamSynchronize(stream()));
    return a.env().Undefined();
  });
}

// Events and graphs live behind integer handles so JS never holds raw CUDA objects.
std::mutex handles_mu;
std::unordered_map<int64_t, cudaEvent_t> events;
std::unordered_map<int64_t, cudaGraphExec_t> graphs;
std::unordered_map<int64_t, std::vector<std::pair<size_t, uintptr_t>>> graph_blocks;  // temporaries each graph owns
int64_t next_handle = 1;

cudaEvent_t event_at(const Args& a, size_t i, const char* name) {
  const int64_t h = a.int64(i, name, 1);
  std::lock_guard<std::mutex> lock(handles_mu);
  auto it = events.find(h);
  if (it == events.end()) a.fail(name, "is not a live event handle");
  return it->second;
}

Napi::Value EventCreate(const Napi::CallbackInfo& info) {
  return guard(info, "eventCreate", [](const Args& a) -> Napi::Value {
    Context::get();
    cudaEvent_t e;
    QK_CUDA_TRY("eventCreate", cudaEventCreate(&e));
    std::lock_guard<std::mutex> lock(handles_mu);
    const int64_t h = next_handle++;
    events[h] = e;
    return Napi::Number::New(a.env(), static_cast<double>(h));
  });
}

Napi::Value EventRecord(const Napi::CallbackInfo& info) {
  return guard(info, "eventRecord", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    QK_CUDA_TRY("eventRecord", cudaEventRecord(event_at(a, 0, "event"), stream()));
    return a.env().Undefined();
  });
}

Napi::Value EventElapsedMs(const Napi::CallbackInfo& info) {
  return guard(info, "eventElapsedMs", [](const Args& a) -> Napi::Value {
    a.expect_count(2);
    cudaEvent_t start = event_at(a, 0, "start");
    cudaEvent_t end = event_at(a, 1, "end");
    QK_CUDA_TRY("eventElapsedMs", cudaEventSynchronize(end));
    float ms = 0.f;
    QK_CUDA_TRY("eventElapsedMs", cudaEventElapsedTime(&ms, start, end));
    return Napi::Number::New(a.env(), ms);
  });
}

Napi::Value EventDestroy(const Napi::CallbackInfo& info) {
  return guard(info, "eventDestroy", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    cudaEvent_t e = event_at(a, 0, "event");
    {
      std::lock_guard<std::mutex> lock(handles_mu);
      events.erase(static_cast<int64_t>(a.int64(0, "event", 1)));
    }
    QK_CUDA_TRY("eventDestroy", cudaEventDestroy(e));
    return a.env().Undefined();
  });
}

Napi::Value CaptureBegin(const Napi::CallbackInfo& info) {
  return guard(info, "captureBegin", [](const Args& a) -> Napi::Value {
    QK_CUDA_TRY("captureBegin", cudaStreamBeginCapture(stream(), cudaStreamCaptureModeRelaxed));
    allocator().begin_capture();
    return a.env().Undefined();
  });
}

Napi::Value CaptureEnd(const Napi::CallbackInfo& info) {
  return guard(info, "captureEnd", [](const Args& a) -> Napi::Value {
    cudaGraph_t graph = nullptr;
    // Temporaries freed during the capture belong to the graph from now on (see Allocator::begin_capture).
    auto owned = allocator().end_capture();
    const cudaError_t ended = cudaStreamEndCapture(stream(), &graph);
    if (ended != cudaSuccess) allocator().give_back(owned);
    QK_CUDA_TRY("captureEnd", ended);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (inst != cudaSuccess) allocator().give_back(owned);
    QK_CUDA_TRY("captureEnd", inst);
    std::lock_guard<std::mutex> lock(handles_mu);
    const int64_t h = next_handle++;
    graphs[h] = exec;
    graph_blocks[h] = std::move(owned);
    return Napi::Number::New(a.env(), static_cast<double>(h));
  });
}

cudaGraphExec_t graph_at(const Args& a, size_t i) {
  const int64_t h = a.int64(i, "graph", 1);
  std::lock_guard<std::mutex> lock(handles_mu);
  auto it = graphs.find(h);
  if (it == graphs.end()) a.fail("graph", "is not a live graph handle");
  return it->second;
}

Napi::Value GraphLaunch(const Napi::CallbackInfo& info) {
  return guard(info, "graphLaunch", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    QK_CUDA_TRY("graphLaunch", cudaGraphLaunch(graph_at(a, 0), stream()));
    return a.env().Undefined();
  });
}

Napi::Value GraphDestroy(const Napi::CallbackInfo& info) {
  return guard(info, "graphDestroy", [](const Args& a) -> Napi::Value {
    a.expect_count(1);
    cudaGraphExec_t g = graph_at(a, 0);
    std::vector<std::pair<size_t, uintptr_t>> owned;
    {
      std::lock_guard<std::mutex> lock(handles_mu);
      const auto h = static_cast<int64_t>(a.int64(0, "graph", 1));
      graphs.erase(h);
      owned = std::move(graph_blocks[h]);
      graph_blocks.erase(h);
    }
    // A replay may still be queued: the graph's temporaries return to the cache only once it has finished.
    QK_CUDA_TRY("graphDestroy", cudaStreamSynchronize(stream()));
    allocator().give_back(owned);
    QK_CUDA_TRY("graphDestroy", cudaGraphExecDestroy(g));
    return a.env().Undefined();
  });
}

}  // namespace

void register_runtime(Napi::Env env, Napi::Object& exports) {
  define(env, exports, "probe", Probe);
  define(env, exports, "deviceInfo", DeviceInfo);
  define(env, exports, "malloc", Malloc);
  define(env, exports, "free", Free);
  define(env, exports, "copyToDevice", CopyToDevice);
  define(env, exports, "copyToHost", CopyToHost);
  define(env, exports, "copyDeviceToDevice", CopyDeviceToDevice);
  define(env, exports, "copyKernel", CopyKernel);
  define(env, exports, "memset", Memset);
  define(env, exports, "memoryStats", MemoryStatsFn);
  define(env, exports, "emptyCache", EmptyCache);
  define(env, exports, "synchronize", Synchronize);
  define(env, exports, "eventCreate", EventCreate);
  define(env, exports, "eventRecord", EventRecord);
  define(env, exports, "eventElapsedMs", EventElapsedMs);
  define(env, exports, "eventDestroy", EventDestroy);
  define(env, exports, "captureBegin", CaptureBegin);
  define(env, exports, "captureEnd", CaptureEnd);
  define(env, exports, "graphLaunch", GraphLaunch);
  define(env, exports, "graphDestroy", GraphDestroy);
}

}  // namespace qk::binding

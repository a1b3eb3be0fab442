/* paddle_loader: loads libxccl.so exactly as PaddlePaddle loads a
 * CustomDevice runtime plugin, then drives it the way Paddle's collective
 * path does. One rank per process (run it under xcclrun).
 *
 *   xcclrun -n 4 ./paddle_loader ./libxccl.so 912 /tmp/iddir
 *
 * LAYOUT is the C_DeviceInterface size Paddle would pass (904, 912, 1032, or
 * anything else to see the library refused). Exit 0: every check passed;
 * 3: the library was skipped, as Paddle would skip it; 1: a check failed. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "xccl_paddle.h"

static int rank, nranks;

#define FAIL(...)                                  \
  do {                                             \
    fprintf(stderr, "rank %d: FAIL: ", rank);      \
    fprintf(stderr, __VA_ARGS__);                  \
    fprintf(stderr, "\n");                         \
    exit(1);                                       \
  } while (0)
#define OK(call)                                                       \
  do {                                                                 \
    C_Status st_ = (call);                                             \
    if (st_ != C_SUCCESS) FAIL("%s returned %d", #call, (int)st_);      \
  } while (0)

/* The ccl entries, wherever the layout puts them. */
struct ccl {
  C_Status (*get_comm_name)(C_CCLComm, char*);
  C_Status (*get_unique_id_size)(size_t*);
  C_Status (*get_unique_id)(C_CCLRootId*);
  C_Status (*comm_init_rank)(size_t, C_CCLRootId*, size_t, C_CCLComm*);
  C_Status (*destroy_comm)(C_CCLComm);
  C_Status (*all_reduce)(void*, void*, size_t, C_DataType, C_CCLReduceOp, C_CCLComm, C_Stream);
  C_Status (*send)(void*, size_t, C_DataType, size_t, C_CCLComm, C_Stream);
  C_Status (*recv)(void*, size_t, C_DataType, size_t, C_CCLComm, C_Stream);
  C_Status (*all_to_all)(const void**, const size_t*, const C_DataType*, void**, const size_t*,
                         const C_DataType*, size_t, size_t, C_CCLComm, C_Stream);
};

#define TAKE_CCL(t, c)                            \
  do {                                            \
    (c).get_unique_id_size = (t)->xccl_get_unique_id_size; \
    (c).get_unique_id = (t)->xccl_get_unique_id;  \
    (c).comm_init_rank = (t)->xccl_comm_init_rank; \
    (c).destroy_comm = (t)->xccl_destroy_comm;    \
    (c).all_reduce = (t)->xccl_all_reduce;        \
    (c).send = (t)->xccl_send;                    \
    (c).recv = (t)->xccl_recv;                    \
  } while (0)

/* Rank 0 makes the id and publishes it in DIR/id (as Paddle's TCPStore
 * would); the others wait for the file. */
static void exchange_id(const char* dir, C_CCLRootId* id) {
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/id", dir);
  if (rank == 0) {
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (!f || fwrite(id->data, 1, id->sz, f) != id->sz || fclose(f) != 0) FAIL("write %s", tmp);
    if (rename(tmp, path) != 0) FAIL("rename %s", tmp);
    return;
  }
  for (int i = 0; i < 3000; i++) {
    FILE* f = fopen(path, "rb");
    if (f) {
      size_t n = fread(id->data, 1, id->sz, f);
      fclose(f);
      if (n != id->sz) FAIL("id file has %zu bytes, want %zu", n, id->sz);
      return;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  FAIL("no id from rank 0 in %s", path);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: paddle_loader LIB LAYOUT IDDIR\n");
    return 2;
  }
  const char* lib = argv[1];
  size_t layout = strtoull(argv[2], NULL, 10);
  rank = getenv("XCCL_RANK") ? atoi(getenv("XCCL_RANK")) : 0;
  nranks = getenv("XCCL_NRANKS") ? atoi(getenv("XCCL_NRANKS")) : 1;

  /* 1. dlopen with RTLD_LAZY, find InitPlugin (Paddle's LoadCustomLib). */
  void* h = dlopen(lib, RTLD_LAZY);
  if (!h) FAIL("dlopen %s: %s", lib, dlerror());
  void (*init_plugin)(CustomRuntimeParams*) = (void (*)(CustomRuntimeParams*))dlsym(h, "InitPlugin");
  if (!init_plugin) {
    printf("WARNING: fail to find InitPlugin symbol in %s\n", lib);
    return 3;
  }

  /* 2. Zeroed params and interface with Paddle's sizes. Old Paddle (904)
   * has the 88-byte params without pir_default_passes. */
  CustomRuntimeParams params;
  memset(&params, 0, sizeof params);
  params.size = layout == 904 ? 88 : sizeof(CustomRuntimeParams);
  size_t alloc = layout > 2048 ? layout : 2048;
  void* iface = calloc(1, alloc);
  *(size_t*)iface = layout;
  params.interface = iface;
  init_plugin(&params);
  if (params.device_type == NULL) {
    for (size_t i = sizeof(size_t); i < alloc; i++) /* a refusal writes nothing */
      if (((unsigned char*)iface)[i] != 0) FAIL("InitPlugin refused the library but wrote its byte %zu", i);
    printf("WARNING: InitPlugin failed, please check the version compatibility. %s will not be loaded\n", lib);
    return 3;
  }
  for (size_t i = layout; i < alloc; i++)
    if (((unsigned char*)iface)[i] != 0) FAIL("InitPlugin wrote past the %zu-byte interface", layout);

  /* 3. Paddle's validation: version and the required entries (new and old). */
  size_t v = params.version.major * 10000 + params.version.minor * 100 + params.version.patch;
  if (v < 101) FAIL("version %zu.%zu.%zu is below 0.1.1", params.version.major, params.version.minor, params.version.patch);
  xccl_paddle_interface_904* t = iface; /* the device, memory and size blocks are common */
  const void* required[] = {t->set_device, t->get_device, t->create_event, t->record_event, t->destroy_event,
                            t->synchronize_event, t->device_memory_allocate, t->device_memory_deallocate,
                            t->get_device_count, t->get_device_list, t->create_stream, t->destroy_stream,
                            t->synchronize_stream, t->stream_wait_event, t->memory_copy_h2d, t->memory_copy_d2h,
                            t->memory_copy_d2d, t->device_memory_stats, t->device_min_chunk_size,
                            t->synchronize_device, t->query_stream, t->query_event, t->initialize, t->finalize};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (!required[i]) FAIL("required entry %zu is NULL", i);

  struct ccl c;
  memset(&c, 0, sizeof c);
  if (layout == 904) {
    TAKE_CCL((xccl_paddle_interface_904*)iface, c);
  } else if (layout == 912) {
    TAKE_CCL((xccl_paddle_interface_912*)iface, c);
    c.all_to_all = ((xccl_paddle_interface_912*)iface)->xccl_all_to_all;
  } else {
    xccl_paddle_interface_1032* t3 = iface;
    TAKE_CCL(t3, c);
    c.all_to_all = t3->xccl_all_to_all;
    c.get_comm_name = t3->xccl_get_comm_name;
    size_t cap = 99;
    OK(t3->get_compute_capability(NULL, &cap));
    bool fp16 = false;
    OK(t3->is_float16_supported(NULL, &fp16));
    if (!fp16) FAIL("float16 not supported");
  }
  if (!c.all_reduce || !c.comm_init_rank || !c.send || !c.recv) FAIL("ccl entries missing");
  if (layout != 904 && !c.all_to_all) FAIL("xccl_all_to_all missing");
  printf("rank %d: loaded %s as '%s' (%s), layout %zu, version %zu.%zu.%zu\n", rank, lib, params.device_type,
         params.sub_device_type ? params.sub_device_type : "", layout, params.version.major, params.version.minor,
         params.version.patch);

  /* 4. initialize, devices, then set_device before init_device (new Paddle). */
  OK(t->initialize());
  size_t count = 0;
  OK(t->get_device_count(&count));
  if (count < (size_t)nranks) FAIL("%zu devices for %d ranks", count, nranks);
  size_t* list = calloc(count, sizeof(size_t));
  OK(t->get_device_list(list));
  for (size_t i = 0; i < count; i++)
    if (list[i] != i) FAIL("device list[%zu] = %zu", i, list[i]);
  struct C_Device_st dev = {rank};
  OK(t->set_device(&dev));
  OK(t->init_device(&dev));
  struct C_Device_st cur = {-1};
  OK(t->get_device(&cur));
  if (cur.id != rank) FAIL("get_device = %d, want %d", cur.id, rank);
  size_t total = 0, avail = 0, chunk = 0;
  OK(t->device_memory_stats(&dev, &total, &avail));
  OK(t->device_min_chunk_size(&dev, &chunk));
  if (total == 0 || avail == 0 || avail > total || chunk == 0) FAIL("memory stats %zu/%zu chunk %zu", avail, total, chunk);

  C_Stream stream = NULL;
  OK(t->create_stream(&dev, &stream));
  C_Event ev = NULL;
  OK(t->create_event(&dev, &ev));
  OK(t->query_event(&dev, ev)); /* never recorded: complete */

  /* 5. The unique id: rank 0 makes it, it travels through a file. */
  size_t idsz = 0;
  OK(c.get_unique_id_size(&idsz));
  C_CCLRootId id = {.sz = idsz, .data = calloc(1, idsz)};
  if (rank == 0) OK(c.get_unique_id(&id));
  exchange_id(argv[3], &id);
  C_CCLComm comm = NULL;
  OK(c.comm_init_rank((size_t)nranks, &id, (size_t)rank, &comm));
  memset(id.data, 0xA5, id.sz); /* Paddle's id memory dies after the call */
  free(id.data);
  if (c.get_comm_name) {
    char name[128] = {0};
    OK(c.get_comm_name(comm, name));
    if (!name[0]) FAIL("empty comm name");
  }

  /* 6. In-place all_reduce on the created stream, then synchronize. */
  const size_t n = 100003;
  float* host = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) host[i] = (float)(rank + 1) * (float)(i % 5 + 1);
  void* buf = NULL;
  OK(t->device_memory_allocate(&dev, &buf, n * sizeof(float)));
  OK(t->memory_copy_h2d(&dev, buf, host, n * sizeof(float)));
  OK(c.all_reduce(buf, buf, n, FLOAT32, SUM, comm, stream));
  OK(t->record_event(&dev, stream, ev));
  OK(t->synchronize_stream(&dev, stream));
  OK(t->query_event(&dev, ev));
  OK(t->query_stream(&dev, stream));
  OK(t->memory_copy_d2h(&dev, host, buf, n * sizeof(float)));
  float tri = (float)(nranks * (nranks + 1) / 2);
  for (size_t i = 0; i < n; i++)
    if (host[i] != tri * (float)(i % 5 + 1)) FAIL("all_reduce[%zu] = %g", i, host[i]);

  /* 7. all_to_all: rank r sends p+1 int32 to rank p (uneven splits). */
  if (c.all_to_all) {
    int32_t* sb = calloc((size_t)nranks * (size_t)nranks, sizeof(int32_t));
    int32_t* rb = calloc((size_t)nranks * (size_t)nranks, sizeof(int32_t));
    const void** sp = calloc((size_t)nranks, sizeof(void*));
    void** rp = calloc((size_t)nranks, sizeof(void*));
    size_t *sc = calloc((size_t)nranks, sizeof(size_t)), *rc = calloc((size_t)nranks, sizeof(size_t));
    C_DataType *sd = calloc((size_t)nranks, sizeof(C_DataType)), *rd = calloc((size_t)nranks, sizeof(C_DataType));
    for (int p = 0; p < nranks; p++) {
      for (int i = 0; i <= p; i++) sb[p * nranks + i] = rank * 100 + p * 10 + i;
      sp[p] = sb + p * nranks;
      sc[p] = (size_t)p + 1;
      sd[p] = INT32;
      rp[p] = rb + p * nranks;
      rc[p] = (size_t)rank + 1;
      rd[p] = INT32;
    }
    OK(c.all_to_all(sp, sc, sd, rp, rc, rd, (size_t)rank, (size_t)nranks, comm, stream));
    OK(t->synchronize_stream(&dev, stream));
    for (int p = 0; p < nranks; p++)
      for (int i = 0; i <= rank; i++)
        if (rb[p * nranks + i] != p * 100 + rank * 10 + i) FAIL("all_to_all from %d [%d] = %d", p, i, rb[p * nranks + i]);
    free(sb); free(rb); free(sp); free(rp); free(sc); free(rc); free(sd); free(rd);
  }

  /* 8. A ring of send/recv without group calls: every rank sends first. */
  if (nranks > 1) {
    int32_t out[64], in[64];
    for (int i = 0; i < 64; i++) out[i] = rank * 1000 + i;
    OK(c.send(out, 64, INT32, (size_t)((rank + 1) % nranks), comm, stream));
    OK(c.recv(in, 64, INT32, (size_t)((rank + nranks - 1) % nranks), comm, stream));
    OK(t->synchronize_stream(&dev, stream));
    int from = (rank + nranks - 1) % nranks;
    for (int i = 0; i < 64; i++)
      if (in[i] != from * 1000 + i) FAIL("ring recv[%d] = %d", i, in[i]);
  }

  /* 9. count 0 with NULL buffers and a NULL stream is fine. */
  OK(c.all_reduce(NULL, NULL, 0, FLOAT32, SUM, comm, NULL));

  /* 10. Teardown in Paddle's order. */
  OK(c.destroy_comm(comm));
  OK(c.destroy_comm(NULL));
  OK(t->destroy_event(&dev, ev));
  OK(t->destroy_stream(&dev, stream));
  OK(t->device_memory_deallocate(&dev, buf, n * sizeof(float)));
  OK(t->deinit_device(&dev));
  OK(t->finalize());
  printf("rank %d of %d: paddle loader OK (layout %zu)\n", rank, nranks, layout);
  free(host);
  free(list);
  free(iface);
  return 0;
}

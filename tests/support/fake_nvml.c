/*
 * A fake libnvidia-ml.so.1 for tests: the real pynvml binding loads it through
 * LD_LIBRARY_PATH and calls it exactly as it would call NVIDIA's library.
 *
 * It exports only the entry points envlock's NVML probe reaches, with the struct
 * layouts pynvml declares (nvmlPciInfo_t v3, nvmlMemory_t, nvmlGpuFabricInfo_t and _v2/_v3).
 * nvmlInit* reads the machine to pretend to be from the file named by FAKE_NVML_SCENARIO,
 * one fact a line ('#' starts a comment):
 *
 *   driver 535.104.05                  nvmlSystemGetDriverVersion
 *   cuda 12020                         nvmlSystemGetCudaDriverVersion(_v2)
 *   init_error 9                       nvmlInit* fails with this nvmlReturn_t
 *   count_error 3 | driver_error 3 | cuda_error 3
 *   gpu 0 name="NVIDIA H20" uuid=GPU-... cc=9.0 mem=97871 bus=00000000:18:00.0 mig=0 lost=0
 *       mem in MiB; mig: 0 off, 1 on, -1 NOT_SUPPORTED;
 *       lost: 1 = the handle query says GPU_IS_LOST, 2 = the handle works, every query says so
 *   nvlink 0 1 [n]                     n (default 1) active NVLinks between GPUs 0 and 1
 *   nvswitch 0 [n]                     n (default 18) active NVLinks from GPU 0 to NVSwitches
 *   topo 0 1 SYS | topo_all PHB        common ancestor (INTERNAL PIX PXB PHB NODE SYS or a number);
 *                                      pairs without one: NVML_ERROR_NOT_SUPPORTED
 *   p2p 0 1 0 | p2p_all 0              nvmlGpuP2PStatus_t for the read capability;
 *   p2p_error 0 1 3                    or an error; pairs without one: NOT_SUPPORTED
 *   fabric 0 state=3 status=0          fabric info; GPUs without one: NOT_SUPPORTED
 *   fabric_v 0                         nvmlDeviceGetGpuFabricInfoV says FUNCTION_NOT_FOUND
 *   error 0 mem 3                      that query on GPU 0 fails with that code; queries:
 *                                      name uuid cc mem pci mig nvlink remotetype remotepci
 *                                      topo p2p fabric
 *
 * When FAKE_NVML_LOG names a file, each successful init and each shutdown appends a line.
 * Every query before init (or after the last shutdown) returns NVML_ERROR_UNINITIALIZED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

enum {
    SUCCESS = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3,
    INSUFFICIENT_SIZE = 7, FUNCTION_NOT_FOUND = 13, GPU_IS_LOST = 15,
    ARGUMENT_VERSION_MISMATCH = 25, UNKNOWN = 999
};

#define MAX_GPUS 16
#define DEVICE_LINKS 18 /* links per GPU (Hopper); higher indices are INVALID_ARGUMENT */
#define LINK_TO_SWITCH (-1)
#define UNSET (-1000)

enum { Q_NAME, Q_UUID, Q_CC, Q_MEM, Q_PCI, Q_MIG, Q_NVLINK, Q_REMOTETYPE, Q_REMOTEPCI,
       Q_TOPO, Q_P2P, Q_FABRIC, Q_COUNT };
static const char *QUERY_NAMES[Q_COUNT] = { "name", "uuid", "cc", "mem", "pci", "mig",
    "nvlink", "remotetype", "remotepci", "topo", "p2p", "fabric" };

typedef struct {
    char name[96], uuid[96], bus[32];
    int cc_major, cc_minor, mig, lost, nlinks;
    unsigned long long mem_mib;
    int link_peer[DEVICE_LINKS]; /* GPU index, or LINK_TO_SWITCH */
    int fabric_set;
    unsigned fabric_state, fabric_status;
    int error[Q_COUNT];
} fake_gpu;

static struct {
    int init_count;
    char driver[80];
    int cuda, init_error, count_error, driver_error, cuda_error, fabric_v;
    int ngpus;
    fake_gpu gpu[MAX_GPUS];
    int topo[MAX_GPUS][MAX_GPUS], p2p[MAX_GPUS][MAX_GPUS], p2p_error[MAX_GPUS][MAX_GPUS];
    int topo_all, p2p_all;
} S;

/* pynvml's ctypes layouts */
typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

/* nvml.h: nvmlGpuFabricState_t is an unsigned char, and the uuid is 16 bytes (pynvml up
 * to 13.610 declared 80 for the unversioned struct: its reads of a real driver's answer
 * miss the state) */
typedef struct {
    unsigned char clusterUuid[16];
    int status;
    unsigned cliqueId;
    unsigned char state;
} nvmlGpuFabricInfo_t;

typedef struct {
    unsigned version;
    unsigned char clusterUuid[16];
    int status;
    unsigned cliqueId;
    unsigned char state;
    unsigned healthMask;
    unsigned char healthSummary; /* v3 only */
} nvmlGpuFabricInfo_v3_t;

/* -- scenario ------------------------------------------------------------------------ */

static void log_event(const char *what) {
    const char *path = getenv("FAKE_NVML_LOG");
    FILE *f;
    if (!path || !*path || !(f = fopen(path, "a")))
        return;
    fprintf(f, "%s\n", what);
    fclose(f);
}

static int topo_level(const char *word) {
    static const struct { const char *name; int level; } LEVELS[] = {
        {"INTERNAL", 0}, {"PIX", 10}, {"SINGLE", 10}, {"PXB", 20}, {"MULTIPLE", 20},
        {"PHB", 30}, {"HOSTBRIDGE", 30}, {"NODE", 40}, {"SYS", 50}, {"SYSTEM", 50}};
    size_t i;
    char *end;
    long n;
    for (i = 0; i < sizeof LEVELS / sizeof LEVELS[0]; i++)
        if (strcmp(word, LEVELS[i].name) == 0)
            return LEVELS[i].level;
    n = strtol(word, &end, 10);
    return (*word && !*end) ? (int)n : UNSET;
}

static int valid_gpu(int i) { return i >= 0 && i < MAX_GPUS; }

/* next key=value (value optionally "quoted") from *p; 0 at the end of the line */
static int next_pair(const char **p, char *key, size_t ks, char *val, size_t vs) {
    const char *s = *p;
    size_t n = 0;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s || *s == '\n' || *s == '#')
        return 0;
    while (*s && *s != '=' && *s != ' ' && n + 1 < ks)
        key[n++] = *s++;
    key[n] = 0;
    if (*s++ != '=')
        return -1;
    n = 0;
    if (*s == '"') {
        s++;
        while (*s && *s != '"' && n + 1 < vs)
            val[n++] = *s++;
        if (*s++ != '"')
            return -1;
    } else {
        while (*s && *s != ' ' && *s != '\t' && *s != '\n' && n + 1 < vs)
            val[n++] = *s++;
    }
    val[n] = 0;
    *p = s;
    return 1;
}

static int copy_value(char *dst, size_t size, const char *val) {
    size_t n = strlen(val);
    if (n >= size) return -1;
    memcpy(dst, val, n + 1);
    return 0;
}

static int parse_gpu(const char *rest) {
    char key[32], val[128];
    int idx, used = 0, r;
    fake_gpu *g;
    if (sscanf(rest, "%d%n", &idx, &used) != 1 || !valid_gpu(idx))
        return -1;
    g = &S.gpu[idx];
    if (idx >= S.ngpus)
        S.ngpus = idx + 1;
    rest += used;
    while ((r = next_pair(&rest, key, sizeof key, val, sizeof val)) == 1) {
        if (!strcmp(key, "name")) { if (copy_value(g->name, sizeof g->name, val)) return -1; }
        else if (!strcmp(key, "uuid")) { if (copy_value(g->uuid, sizeof g->uuid, val)) return -1; }
        else if (!strcmp(key, "bus")) { if (copy_value(g->bus, sizeof g->bus, val)) return -1; }
        else if (!strcmp(key, "cc")) { if (sscanf(val, "%d.%d", &g->cc_major, &g->cc_minor) != 2) return -1; }
        else if (!strcmp(key, "mem")) { if (sscanf(val, "%llu", &g->mem_mib) != 1) return -1; }
        else if (!strcmp(key, "mig")) { if (sscanf(val, "%d", &g->mig) != 1) return -1; }
        else if (!strcmp(key, "lost")) { if (sscanf(val, "%d", &g->lost) != 1) return -1; }
        else return -1;
    }
    return r;
}

static int add_links(int gpu, int peer, int n) {
    fake_gpu *g = &S.gpu[gpu];
    while (n-- > 0) {
        if (g->nlinks >= DEVICE_LINKS)
            return -1;
        g->link_peer[g->nlinks++] = peer;
    }
    return 0;
}

static int parse_line(const char *line) {
    char word[32], text[96];
    const char *rest;
    int a, b, c, n, used = 0;
    unsigned st, ss;
    if (sscanf(line, " %31s%n", word, &used) != 1 || word[0] == '#')
        return 0;
    rest = line + used;
    if (!strcmp(word, "gpu")) return parse_gpu(rest);
    if (!strcmp(word, "driver")) return sscanf(rest, "%79s", S.driver) == 1 ? 0 : -1;
    if (!strcmp(word, "cuda")) return sscanf(rest, "%d", &S.cuda) == 1 ? 0 : -1;
    if (!strcmp(word, "init_error")) return sscanf(rest, "%d", &S.init_error) == 1 ? 0 : -1;
    if (!strcmp(word, "count_error")) return sscanf(rest, "%d", &S.count_error) == 1 ? 0 : -1;
    if (!strcmp(word, "driver_error")) return sscanf(rest, "%d", &S.driver_error) == 1 ? 0 : -1;
    if (!strcmp(word, "cuda_error")) return sscanf(rest, "%d", &S.cuda_error) == 1 ? 0 : -1;
    if (!strcmp(word, "fabric_v")) return sscanf(rest, "%d", &S.fabric_v) == 1 ? 0 : -1;
    if (!strcmp(word, "p2p_all")) return sscanf(rest, "%d", &S.p2p_all) == 1 ? 0 : -1;
    if (!strcmp(word, "topo_all")) {
        if (sscanf(rest, "%95s", text) != 1) return -1;
        return (S.topo_all = topo_level(text)) == UNSET ? -1 : 0;
    }
    if (!strcmp(word, "nvlink")) {
        if ((n = sscanf(rest, "%d %d %d", &a, &b, &c)) < 2) return -1;
        if (!valid_gpu(a) || !valid_gpu(b) || a == b) return -1;
        if (n == 2) c = 1;
        return add_links(a, b, c) || add_links(b, a, c) ? -1 : 0;
    }
    if (!strcmp(word, "nvswitch")) {
        if ((n = sscanf(rest, "%d %d", &a, &c)) < 1 || !valid_gpu(a)) return -1;
        return add_links(a, LINK_TO_SWITCH, n == 1 ? DEVICE_LINKS : c);
    }
    if (!strcmp(word, "topo")) {
        if (sscanf(rest, "%d %d %95s", &a, &b, text) != 3) return -1;
        if (!valid_gpu(a) || !valid_gpu(b) || (c = topo_level(text)) == UNSET) return -1;
        S.topo[a][b] = S.topo[b][a] = c;
        return 0;
    }
    if (!strcmp(word, "p2p") || !strcmp(word, "p2p_error")) {
        if (sscanf(rest, "%d %d %d", &a, &b, &c) != 3 || !valid_gpu(a) || !valid_gpu(b))
            return -1;
        if (word[3])
            S.p2p_error[a][b] = S.p2p_error[b][a] = c;
        else
            S.p2p[a][b] = S.p2p[b][a] = c;
        return 0;
    }
    if (!strcmp(word, "fabric")) {
        if (sscanf(rest, "%d state=%u status=%u", &a, &st, &ss) != 3 || !valid_gpu(a))
            return -1;
        S.gpu[a].fabric_set = 1;
        S.gpu[a].fabric_state = st;
        S.gpu[a].fabric_status = ss;
        return 0;
    }
    if (!strcmp(word, "error")) {
        if (sscanf(rest, "%d %95s %d", &a, text, &c) != 3 || !valid_gpu(a)) return -1;
        for (n = 0; n < Q_COUNT; n++)
            if (!strcmp(text, QUERY_NAMES[n])) {
                S.gpu[a].error[n] = c;
                return 0;
            }
        return -1;
    }
    return -1;
}

static int load_scenario(void) {
    const char *path = getenv("FAKE_NVML_SCENARIO");
    char line[512];
    int i, j, lineno = 0;
    FILE *f;
    memset(&S, 0, sizeof S);
    S.fabric_v = 1;
    S.p2p_all = S.topo_all = UNSET;
    for (i = 0; i < MAX_GPUS; i++)
        for (j = 0; j < MAX_GPUS; j++)
            S.topo[i][j] = S.p2p[i][j] = UNSET;
    if (!path || !(f = fopen(path, "r"))) {
        fprintf(stderr, "fake nvml: cannot read FAKE_NVML_SCENARIO=%s\n", path ? path : "(unset)");
        return UNKNOWN;
    }
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (parse_line(line) != 0) {
            fprintf(stderr, "fake nvml: %s:%d: cannot parse: %s", path, lineno, line);
            fclose(f);
            return UNKNOWN;
        }
    }
    fclose(f);
    return SUCCESS;
}

/* -- helpers --------------------------------------------------------------------------- */

static int index_of(const void *handle) {
    const fake_gpu *g = handle;
    if (g < S.gpu || g >= S.gpu + S.ngpus)
        return -1;
    return (int)(g - S.gpu);
}

/* the GPU behind a handle for query q, or an error code */
static int gate(const void *handle, int q, fake_gpu **out) {
    int i;
    if (!S.init_count) return UNINITIALIZED;
    if ((i = index_of(handle)) < 0) return INVALID_ARGUMENT;
    if (S.gpu[i].lost) return GPU_IS_LOST;
    if (S.gpu[i].error[q]) return S.gpu[i].error[q];
    *out = &S.gpu[i];
    return SUCCESS;
}

static int put_string(char *buf, unsigned len, const char *value) {
    if (!buf) return INVALID_ARGUMENT;
    if (strlen(value) + 1 > len) return INSUFFICIENT_SIZE;
    strcpy(buf, value);
    return SUCCESS;
}

static void fill_pci(nvmlPciInfo_t *pci, const char *bus_id) {
    unsigned domain = 0, bus = 0, dev = 0, fn = 0;
    memset(pci, 0, sizeof *pci);
    sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    pci->pciDeviceId = 0x233010DE;
    pci->pciSubSystemId = 0x16C110DE;
    snprintf(pci->busId, sizeof pci->busId, "%s", bus_id);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X",
             domain & 0xFFFF, bus & 0xFF, dev & 0xFF, fn & 0xF);
}

/* the link's index into g->link_peer, or an error code (as a negative number) */
static int link_slot(const fake_gpu *g, unsigned link) {
    if (g->nlinks == 0) return -NOT_SUPPORTED;
    if (link >= DEVICE_LINKS) return -INVALID_ARGUMENT;
    if (link >= (unsigned)g->nlinks) return -NOT_SUPPORTED; /* an inactive link has no far end */
    return (int)link;
}

/* -- NVML entry points ------------------------------------------------------------------- */

API int nvmlInitWithFlags(unsigned flags) {
    int rc;
    (void)flags;
    if (S.init_count) {
        S.init_count++;
        return SUCCESS;
    }
    if ((rc = load_scenario()) != SUCCESS) return rc;
    if (S.init_error) return S.init_error;
    S.init_count = 1;
    log_event("init");
    return SUCCESS;
}

API int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

API int nvmlShutdown(void) {
    if (!S.init_count) return UNINITIALIZED;
    S.init_count--;
    log_event("shutdown");
    return SUCCESS;
}

API const char *nvmlErrorString(int result) {
    switch (result) {
    case SUCCESS: return "Success";
    case UNINITIALIZED: return "Uninitialized";
    case INVALID_ARGUMENT: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 9: return "Driver Not Loaded";
    case GPU_IS_LOST: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}

API int nvmlSystemGetDriverVersion(char *version, unsigned length) {
    if (!S.init_count) return UNINITIALIZED;
    if (S.driver_error) return S.driver_error;
    return put_string(version, length, S.driver);
}

API int nvmlSystemGetCudaDriverVersion(int *cuda) {
    if (!S.init_count) return UNINITIALIZED;
    if (S.cuda_error) return S.cuda_error;
    if (!cuda) return INVALID_ARGUMENT;
    *cuda = S.cuda;
    return SUCCESS;
}

API int nvmlSystemGetCudaDriverVersion_v2(int *cuda) { return nvmlSystemGetCudaDriverVersion(cuda); }

API int nvmlDeviceGetCount_v2(unsigned *count) {
    if (!S.init_count) return UNINITIALIZED;
    if (S.count_error) return S.count_error;
    if (!count) return INVALID_ARGUMENT;
    *count = (unsigned)S.ngpus;
    return SUCCESS;
}

API int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **handle) {
    if (!S.init_count) return UNINITIALIZED;
    if (index >= (unsigned)S.ngpus || !handle) return INVALID_ARGUMENT;
    if (S.gpu[index].lost == 1) return GPU_IS_LOST;
    *handle = &S.gpu[index];
    return SUCCESS;
}

API int nvmlDeviceGetName(void *handle, char *name, unsigned length) {
    fake_gpu *g;
    int rc = gate(handle, Q_NAME, &g);
    return rc ? rc : put_string(name, length, g->name);
}

API int nvmlDeviceGetUUID(void *handle, char *uuid, unsigned length) {
    fake_gpu *g;
    int rc = gate(handle, Q_UUID, &g);
    return rc ? rc : put_string(uuid, length, g->uuid);
}

API int nvmlDeviceGetCudaComputeCapability(void *handle, int *major, int *minor) {
    fake_gpu *g;
    int rc = gate(handle, Q_CC, &g);
    if (rc) return rc;
    if (!major || !minor) return INVALID_ARGUMENT;
    *major = g->cc_major;
    *minor = g->cc_minor;
    return SUCCESS;
}

API int nvmlDeviceGetMemoryInfo(void *handle, nvmlMemory_t *memory) {
    fake_gpu *g;
    int rc = gate(handle, Q_MEM, &g);
    if (rc) return rc;
    if (!memory) return INVALID_ARGUMENT;
    memory->total = g->mem_mib << 20;
    memory->used = 0;
    memory->free = memory->total;
    return SUCCESS;
}

API int nvmlDeviceGetPciInfo_v3(void *handle, nvmlPciInfo_t *pci) {
    fake_gpu *g;
    int rc = gate(handle, Q_PCI, &g);
    if (rc) return rc;
    if (!pci) return INVALID_ARGUMENT;
    fill_pci(pci, g->bus);
    return SUCCESS;
}

API int nvmlDeviceGetMigMode(void *handle, unsigned *current, unsigned *pending) {
    fake_gpu *g;
    int rc = gate(handle, Q_MIG, &g);
    if (rc) return rc;
    if (!current || !pending) return INVALID_ARGUMENT;
    if (g->mig < 0) return NOT_SUPPORTED;
    *current = *pending = (unsigned)g->mig;
    return SUCCESS;
}

API int nvmlDeviceGetTopologyCommonAncestor(void *h1, void *h2, int *level) {
    fake_gpu *a, *b;
    int rc = gate(h1, Q_TOPO, &a), value;
    if (rc || (rc = gate(h2, Q_TOPO, &b))) return rc;
    if (!level || a == b) return INVALID_ARGUMENT;
    value = S.topo[a - S.gpu][b - S.gpu];
    if (value == UNSET) value = S.topo_all;
    if (value == UNSET) return NOT_SUPPORTED;
    *level = value;
    return SUCCESS;
}

API int nvmlDeviceGetP2PStatus(void *h1, void *h2, int index, int *status) {
    fake_gpu *a, *b;
    int rc = gate(h1, Q_P2P, &a), value;
    if (rc || (rc = gate(h2, Q_P2P, &b))) return rc;
    if (!status || a == b) return INVALID_ARGUMENT;
    if (index != 0) return NOT_SUPPORTED; /* only NVML_P2P_CAPS_INDEX_READ is modelled */
    if ((rc = S.p2p_error[a - S.gpu][b - S.gpu])) return rc;
    value = S.p2p[a - S.gpu][b - S.gpu];
    if (value == UNSET) value = S.p2p_all;
    if (value == UNSET) return NOT_SUPPORTED;
    *status = value;
    return SUCCESS;
}

API int nvmlDeviceGetNvLinkState(void *handle, unsigned link, unsigned *active) {
    fake_gpu *g;
    int rc = gate(handle, Q_NVLINK, &g);
    if (rc) return rc;
    if (!active) return INVALID_ARGUMENT;
    if (g->nlinks == 0) return NOT_SUPPORTED;
    if (link >= DEVICE_LINKS) return INVALID_ARGUMENT;
    *active = link < (unsigned)g->nlinks;
    return SUCCESS;
}

API int nvmlDeviceGetNvLinkRemoteDeviceType(void *handle, unsigned link, unsigned *type) {
    fake_gpu *g;
    int rc = gate(handle, Q_REMOTETYPE, &g), slot;
    if (rc) return rc;
    if (!type) return INVALID_ARGUMENT;
    if ((slot = link_slot(g, link)) < 0) return -slot;
    *type = g->link_peer[slot] == LINK_TO_SWITCH ? 2u : 0u;
    return SUCCESS;
}

API int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *handle, unsigned link, nvmlPciInfo_t *pci) {
    fake_gpu *g;
    char switch_bus[32];
    int rc = gate(handle, Q_REMOTEPCI, &g), slot;
    if (rc) return rc;
    if (!pci) return INVALID_ARGUMENT;
    if ((slot = link_slot(g, link)) < 0) return -slot;
    if (g->link_peer[slot] == LINK_TO_SWITCH) {
        /* HGX boards have four NVSwitches; spread the links over them */
        snprintf(switch_bus, sizeof switch_bus, "00000000:%02X:00.0", 0xC1 + slot % 4);
        fill_pci(pci, switch_bus);
    } else {
        fill_pci(pci, S.gpu[g->link_peer[slot]].bus);
    }
    return SUCCESS;
}

static int fabric_common(void *handle, fake_gpu **g) {
    int rc = gate(handle, Q_FABRIC, g);
    if (rc) return rc;
    return (*g)->fabric_set ? SUCCESS : NOT_SUPPORTED;
}

API int nvmlDeviceGetGpuFabricInfo(void *handle, nvmlGpuFabricInfo_t *info) {
    fake_gpu *g;
    int rc = fabric_common(handle, &g);
    if (rc) return rc;
    if (!info) return INVALID_ARGUMENT;
    memset(info, 0, sizeof *info);
    info->status = g->fabric_status;
    info->state = g->fabric_state;
    info->cliqueId = 1;
    return SUCCESS;
}

API int nvmlDeviceGetGpuFabricInfoV(void *handle, nvmlGpuFabricInfo_v3_t *info) {
    fake_gpu *g;
    unsigned major;
    int rc;
    if (!S.fabric_v) return FUNCTION_NOT_FOUND;
    if ((rc = fabric_common(handle, &g))) return rc;
    if (!info) return INVALID_ARGUMENT;
    major = info->version >> 24;
    if (major != 2 && major != 3) return ARGUMENT_VERSION_MISMATCH;
    memset(info->clusterUuid, 0, sizeof info->clusterUuid);
    info->status = g->fabric_status;
    info->state = g->fabric_state;
    info->cliqueId = 1;
    info->healthMask = 0;
    if (major == 3) info->healthSummary = 0;
    return SUCCESS;
}

/*
 * The MAD helper's pipelined loop in C: the same algorithm as mad_pipeline.Pipeline.query (read that
 * docstring first), without the Python interpreter's cost per MAD (about 10 of the 22 us the
 * helper spent on each MAD against ibsim).
 *
 * libibumad is reached through the function pointers the caller passes (umad_send, umad_recv),
 * so this file needs no InfiniBand headers and the tests can drive it with a scripted umad port.
 * Built by scripts/bootstrap.sh into _madpipe.so next to this file; without it the helper runs the
 * Python loop.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*umad_send_fn)(int portid, int agentid, void *umad, int length, int timeout_ms,
                            int retries);
typedef int (*umad_recv_fn)(int portid, void *umad, int *length, int timeout_ms);

enum {
    USER_MAD_HEADER = 64, /* struct ib_user_mad, ABI 5 */
    MAD_SIZE = 256,
    LID_AT = 28,          /* ib_user_mad.addr.lid */
    ADDR_REST = 30,       /* sl .. reserved: zero */
    DATA_OFFSET = 64,     /* attribute data in the MAD */
    DATA_SIZE = 64,       /* what is kept of an answer */
    SMI_CLASS = 0x01,
    PERF_CLASS = 0x04,
    METHOD_GET = 0x01,
    STATUS_REDIRECT = 0x0002,
};

/* status[i] of a query */
enum { MADPIPE_FAILED = 0, MADPIPE_OK = 1, MADPIPE_REDIRECT = 2 };

static double clock_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void put16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v) {
    put16(p, v >> 16);
    put16(p + 2, v);
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The MAD header (and PortSelect of a PMA query) of one query into its class's send buffer. */
static void build(uint8_t *buf, uint32_t cls, uint32_t lid, uint32_t attr, uint32_t mod,
                  uint32_t tid) {
    uint8_t *m = buf + USER_MAD_HEADER;
    put16(buf + LID_AT, lid);
    m[0] = 1; /* base version */
    m[1] = (uint8_t)cls;
    m[2] = 1; /* class version */
    m[3] = METHOD_GET;
    put32(m + 4, 0);   /* status, class specific */
    put32(m + 8, 0);   /* transaction ID, high 32 bits (rewritten on the way) */
    put32(m + 12, tid);
    put16(m + 16, attr);
    put16(m + 18, 0);
    if (cls == PERF_CLASS) { /* modifier 0, PortSelect in the data, as pma_query_via sends */
        put32(m + 20, 0);
        m[DATA_OFFSET + 1] = (uint8_t)mod;
    } else {
        put32(m + 20, mod);
    }
}

/*
 * Every query (n rows of class, LID, attribute, modifier-or-port) with up to `window` in flight.
 * Sends round robin over destination LIDs; a reply is matched by the low 32 bits of its
 * transaction ID (`*tid` is the last one used, and is advanced); a MAD with a umad status, or
 * unanswered past its deadline, is sent again with a fresh ID up to `retries` times. For query i,
 * status[i] is MADPIPE_OK with its 64 data bytes at out + 64 i, MADPIPE_REDIRECT (the caller asks
 * it again synchronously) or MADPIPE_FAILED. stats[0..2] += MADs sent, retried, failed.
 * Returns 0, or -1 when out of memory (nothing was sent).
 */
int madpipe_query(umad_send_fn send, umad_recv_fn recv, int portid, int smi_agent, int perf_agent,
                  uint8_t *smi_buf, uint8_t *perf_buf, uint8_t *recv_buf, const uint32_t *q, int n,
                  int window, int timeout_ms, int retries, uint32_t *tid, uint8_t *out,
                  uint8_t *status, int64_t *stats) {
    if (n <= 0)
        return 0;
    if (window < 1)
        window = 1;
    if (retries < 0)
        retries = 0;
    size_t max_sends = (size_t)n * (size_t)(retries + 1);
    int *order = malloc(sizeof(int) * (size_t)n);
    int *depth = malloc(sizeof(int) * (size_t)n);
    int *attempts = calloc((size_t)n, sizeof(int));
    int *again = malloc(sizeof(int) * (size_t)n);
    int *lane = calloc(65536, sizeof(int));
    int *per_depth = NULL;
    int *sent_query = malloc(sizeof(int) * max_sends);
    double *deadline = malloc(sizeof(double) * max_sends);
    uint8_t *live = calloc(max_sends, 1);
    int rc = -1;
    if (!order || !depth || !attempts || !again || !lane || !sent_query || !deadline || !live)
        goto done;

    /* send order: depth d of a query = how many earlier queries go to its LID; all queries of
       depth 0 first (in request order), then depth 1, ... */
    int max_depth = 0;
    for (int i = 0; i < n; i++) {
        depth[i] = lane[q[4 * i + 1] & 0xFFFF]++;
        if (depth[i] > max_depth)
            max_depth = depth[i];
    }
    per_depth = calloc((size_t)max_depth + 2, sizeof(int));
    if (!per_depth)
        goto done;
    for (int i = 0; i < n; i++)
        per_depth[depth[i] + 1]++;
    for (int d = 1; d <= max_depth + 1; d++)
        per_depth[d] += per_depth[d - 1];
    for (int i = 0; i < n; i++)
        order[per_depth[depth[i]]++] = i;

    for (int c = 0; c < 2; c++) /* sl, path bits, GRH, P_Key index: all 0 */
        memset((c ? perf_buf : smi_buf) + ADDR_REST, 0, USER_MAD_HEADER - ADDR_REST);
    memset(perf_buf + USER_MAD_HEADER + 24, 0, MAD_SIZE - 24);
    memset(status, MADPIPE_FAILED, (size_t)n);

    const double grace = timeout_ms / 1000.0 * 1.25 + 0.01;
    const uint32_t base = *tid;
    size_t sent = 0, oldest = 0;
    int next = 0, n_again = 0, inflight = 0;
    int64_t mads = 0, retried = 0, failed = 0;

    while (next < n || n_again > 0 || inflight > 0) {
        if ((next < n || n_again > 0) && inflight < window) {
            double until = clock_s() + grace;
            while ((next < n || n_again > 0) && inflight < window) {
                int i = n_again > 0 ? again[--n_again] : order[next++];
                const uint32_t *row = q + 4 * i;
                uint32_t id = base + (uint32_t)sent + 1;
                attempts[i]++;
                mads++;
                uint8_t *buf = row[0] == PERF_CLASS ? perf_buf : smi_buf;
                build(buf, row[0], row[1], row[2], row[3], id);
                int agent = row[0] == PERF_CLASS ? perf_agent : smi_agent;
                if (send(portid, agent, buf, MAD_SIZE, timeout_ms, 0) == 0) {
                    sent_query[sent] = i;
                    deadline[sent] = until;
                    live[sent] = 1;
                    sent++;
                    inflight++;
                } else if (attempts[i] <= retries) {
                    retried++;
                    again[n_again++] = i;
                } else {
                    failed++;
                }
            }
            if (inflight == 0)
                continue;
        }
        while (oldest < sent && !live[oldest])
            oldest++;
        int wait_ms = (int)((deadline[oldest] - clock_s()) * 1000) + 1;
        int length = MAD_SIZE;
        if (recv(portid, recv_buf, &length, wait_ms < 1 ? 1 : wait_ms) < 0) {
            /* nothing within the oldest MAD's deadline: expire whatever is overdue */
            double now = clock_s();
            for (; oldest < sent; oldest++) {
                if (!live[oldest])
                    continue;
                if (deadline[oldest] > now)
                    break;
                live[oldest] = 0;
                inflight--;
                int i = sent_query[oldest];
                if (attempts[i] <= retries) {
                    retried++;
                    again[n_again++] = i;
                } else {
                    failed++;
                }
            }
            continue;
        }
        uint32_t ustatus;
        memcpy(&ustatus, recv_buf + 4, sizeof ustatus); /* host order */
        const uint8_t *m = recv_buf + USER_MAD_HEADER;
        uint32_t mstatus = (uint32_t)m[4] << 8 | m[5];
        if (!ustatus && !(m[3] & 0x80))
            continue; /* a request, not an answer */
        if (m[1] == SMI_CLASS)
            mstatus &= 0x7FFF; /* the D bit of directed-route SMPs is not a status */
        size_t s = (size_t)(uint32_t)(get32(m + 12) - base - 1);
        if (s >= sent || !live[s])
            continue; /* a late answer to an attempt given up, or not ours */
        live[s] = 0;
        inflight--;
        int i = sent_query[s];
        if (ustatus) {
            if (attempts[i] <= retries) {
                retried++;
                again[n_again++] = i;
            } else {
                failed++;
            }
        } else if (mstatus == STATUS_REDIRECT) {
            status[i] = MADPIPE_REDIRECT;
        } else if (mstatus) {
            failed++;
        } else {
            memcpy(out + (size_t)i * DATA_SIZE, m + DATA_OFFSET, DATA_SIZE);
            status[i] = MADPIPE_OK;
        }
    }
    *tid = base + (uint32_t)sent;
    stats[0] += mads;
    stats[1] += retried;
    stats[2] += failed;
    rc = 0;
done:
    free(order);
    free(depth);
    free(attempts);
    free(again);
    free(lane);
    free(per_depth);
    free(sent_query);
    free(deadline);
    free(live);
    return rc;
}

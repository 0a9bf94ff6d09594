// shim.h: the C side of mptx's libibverbs binding (qp/verbs).
//
// cgo cannot call the macros (ibv_reg_mr, ibv_query_port), reach into
// unions (ibv_send_wr.wr.rdma, imm_data) or walk linked work-request lists
// cheaply, so the hot paths live here as whole-batch helpers: one cgo
// crossing posts a chain of work requests (mptx_post_send) or polls a set of
// completion queues and re-posts the consumed shared-receive-queue entries
// (mptx_poll). Every pointer passed in is C memory (calloc) or a libibverbs
// object; no Go pointer is ever stored or handed to the device.
#ifndef MPTX_SHIM_H
#define MPTX_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <infiniband/verbs.h>

enum {
	MPTX_OP_WRITE = 1,      // mirrors qp.OpWrite
	MPTX_OP_WRITE_IMM = 2,  // mirrors qp.OpWriteImm
	MPTX_OP_READ = 4,       // mirrors qp.OpRead
	MPTX_MAX_CQ = 32,       // CQs in one poll set (one per NIC)
	MPTX_TS_NONE = 0,
	MPTX_TS_RAW = 1,        // IBV_WC_EX_WITH_COMPLETION_TIMESTAMP (device cycles)
	MPTX_TS_WALLCLOCK = 2,  // IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK (ns)
};

// mptx_wr is one flattened send work request, filled by Go in C memory.
struct mptx_wr {
	uint64_t id;     // wr_id: a slot index, never a pointer
	uint64_t laddr;  // local virtual address (inside a registered MR)
	uint64_t raddr;  // remote virtual address
	uint32_t len;    // bytes; 0 is legal for WRITE WITH IMM
	uint32_t lkey;
	uint32_t rkey;
	uint32_t imm;    // host order; sent as htonl(imm)
	uint32_t op;     // MPTX_OP_*
	uint32_t flags;  // extra IBV_SEND_* flags (IBV_SEND_INLINE)
};

// mptx_post_res is the result of a post: how many were posted and, if not
// all, the errno of the first that was not.
struct mptx_post_res {
	int32_t posted;
	int32_t err;
};

// mptx_wc is one flattened completion.
struct mptx_wc {
	uint64_t id;
	uint64_t ts;        // completion timestamp (raw cycles or ns), 0 if none
	uint32_t qpn;
	uint32_t len;       // byte_len (receive side)
	uint32_t imm;       // host order
	uint32_t vendor_err;
	uint8_t status;     // enum ibv_wc_status
	uint8_t opcode;     // enum ibv_wc_opcode (valid when status == SUCCESS)
	uint8_t cq;         // index of the CQ in its set
	uint8_t has_imm;
};

// mptx_cqset is a set of completion queues polled in one crossing, with an
// optional shared receive queue per CQ whose consumed entries are re-posted.
struct mptx_cqset {
	int32_t n;                            // CQs in use
	int32_t next;                         // round-robin start
	int32_t recv_batch;                   // length of each rwr chain
	int32_t pad;
	struct ibv_cq *cq[MPTX_MAX_CQ];       // for plain polling and arming
	struct ibv_cq_ex *cqx[MPTX_MAX_CQ];   // non-NULL: poll with the extended API
	int32_t ts[MPTX_MAX_CQ];              // MPTX_TS_*
	struct ibv_srq *srq[MPTX_MAX_CQ];     // non-NULL: re-post what was consumed
	struct ibv_recv_wr *rwr[MPTX_MAX_CQ]; // recv_batch pre-linked zero-SGE receives
};

// Batch helpers (hot path).
struct mptx_post_res mptx_post_send(struct ibv_qp *qp, const struct mptx_wr *in, int n,
                                    struct ibv_send_wr *wrs, struct ibv_sge *sges);
int mptx_poll(struct mptx_cqset *set, struct mptx_wc *out, int max, struct ibv_wc *scratch);
int mptx_arm(struct mptx_cqset *set);
int mptx_drain_cq_events(struct ibv_comp_channel *ch);
int mptx_srq_fill(struct ibv_srq *srq, struct ibv_recv_wr *chain, int batch, int n);

// Set-up helpers (cold path).
int mptx_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a);
struct ibv_mr *mptx_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access);
struct ibv_device *mptx_dev_at(struct ibv_device **l, int i);
int mptx_query_device(struct ibv_context *c, struct ibv_device_attr_ex *a);
struct ibv_cq_ex *mptx_create_cq_ex(struct ibv_context *c, int cqe, struct ibv_comp_channel *ch, int ts);
struct ibv_cq *mptx_cq_ex_to_cq(struct ibv_cq_ex *cq);
struct ibv_qp *mptx_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
                              struct ibv_srq *srq, uint32_t max_send_wr, uint32_t max_recv_wr,
                              uint32_t max_inline, struct ibv_qp_cap *out);
struct ibv_srq *mptx_create_srq(struct ibv_pd *pd, uint32_t max_wr);
int mptx_qp_init(struct ibv_qp *qp, uint8_t port, int access);
int mptx_qp_rtr(struct ibv_qp *qp, uint8_t port, int sgid_index, const uint8_t *dgid,
                uint32_t dqpn, uint32_t rq_psn, int mtu, uint32_t flow_label,
                uint8_t tclass, uint8_t hop_limit, uint8_t min_rnr_timer, uint8_t max_dest_rd_atomic);
int mptx_qp_rts(struct ibv_qp *qp, uint32_t sq_psn, uint8_t timeout, uint8_t retry_cnt,
                uint8_t rnr_retry, uint8_t max_rd_atomic);
int mptx_qp_state(struct ibv_qp *qp);
int mptx_qp_to_error(struct ibv_qp *qp);
int mptx_qp_reset(struct ibv_qp *qp);
int mptx_rate_limit(struct ibv_qp *qp, uint32_t kbps);
int mptx_bind_mw2(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr, uint64_t addr,
                  uint64_t len, int access, uint64_t wr_id, uint32_t *rkey);
int mptx_local_inv(struct ibv_qp *qp, uint32_t rkey, uint64_t wr_id);
int mptx_wait_one(struct ibv_cq *cq, long spins, uint64_t *wr_id, int *status);
int mptx_rt_raw_clock(struct ibv_context *c, uint64_t *out);
int mptx_set_nonblock(int fd);

// mptx_async is one asynchronous event (ibv_get_async_event(3)).
struct mptx_async {
	int32_t type;    // enum ibv_event_type
	uint32_t qpn;    // for QP events
	int32_t port;    // for port events
};
int mptx_get_async(struct ibv_context *c, struct mptx_async *out);

#endif

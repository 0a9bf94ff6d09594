//go:build linux && cgo

// shim.c: C helpers for qp/verbs; see shim.h.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <arpa/inet.h>
#include "shim.h"

// errno_of turns a verbs return code into a positive errno. libibverbs
// returns either the errno itself or -1 with errno set, depending on the
// verb and the provider.
static int errno_of(int rc) {
	if (rc > 0) return rc;
	if (rc < 0) return errno ? errno : EIO;
	return 0;
}

struct mptx_post_res mptx_post_send(struct ibv_qp *qp, const struct mptx_wr *in, int n,
                                    struct ibv_send_wr *wrs, struct ibv_sge *sges) {
	struct mptx_post_res res = {0, 0};
	if (n <= 0) return res;
	for (int i = 0; i < n; i++) {
		struct ibv_send_wr *w = &wrs[i];
		const struct mptx_wr *s = &in[i];
		memset(w, 0, sizeof(*w));
		w->wr_id = s->id;
		w->next = (i + 1 < n) ? &wrs[i + 1] : NULL;
		if (s->len > 0) {
			sges[i].addr = s->laddr;
			sges[i].length = s->len;
			sges[i].lkey = s->lkey;
			w->sg_list = &sges[i];
			w->num_sge = 1;
		}
		w->send_flags = IBV_SEND_SIGNALED | s->flags;
		w->wr.rdma.remote_addr = s->raddr;
		w->wr.rdma.rkey = s->rkey;
		if (s->op == MPTX_OP_WRITE_IMM) {
			w->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			w->imm_data = htonl(s->imm);
		} else if (s->op == MPTX_OP_READ) {
			w->opcode = IBV_WR_RDMA_READ;
		} else {
			w->opcode = IBV_WR_RDMA_WRITE;
		}
	}
	struct ibv_send_wr *bad = NULL;
	errno = 0;
	int rc = ibv_post_send(qp, &wrs[0], &bad);
	if (rc == 0) {
		res.posted = n;
		return res;
	}
	res.err = errno_of(rc);
	res.posted = bad ? (int)(bad - wrs) : 0;
	if (res.posted < 0 || res.posted > n) res.posted = 0;
	return res;
}

static void fill_plain(struct mptx_wc *o, const struct ibv_wc *wc, int cq) {
	o->id = wc->wr_id;
	o->ts = 0;
	o->qpn = wc->qp_num;
	o->len = wc->byte_len;
	o->status = (uint8_t)wc->status;
	o->opcode = (uint8_t)wc->opcode;
	o->vendor_err = wc->vendor_err;
	o->cq = (uint8_t)cq;
	o->has_imm = (wc->status == IBV_WC_SUCCESS && (wc->wc_flags & IBV_WC_WITH_IMM)) ? 1 : 0;
	o->imm = o->has_imm ? ntohl(wc->imm_data) : 0;
}

static int poll_plain(struct ibv_cq *cq, struct mptx_wc *out, int max, struct ibv_wc *scratch, int idx) {
	int n = ibv_poll_cq(cq, max, scratch);
	if (n < 0) return -EIO;
	for (int i = 0; i < n; i++) fill_plain(&out[i], &scratch[i], idx);
	return n;
}

static void fill_ex(struct mptx_wc *o, struct ibv_cq_ex *cq, int ts, int idx) {
	o->id = cq->wr_id;
	o->status = (uint8_t)cq->status;
	o->qpn = ibv_wc_read_qp_num(cq);
	o->vendor_err = ibv_wc_read_vendor_err(cq);
	o->cq = (uint8_t)idx;
	o->ts = 0;
	o->len = 0;
	o->imm = 0;
	o->has_imm = 0;
	o->opcode = 0;
	if (cq->status != IBV_WC_SUCCESS) return;
	o->opcode = (uint8_t)ibv_wc_read_opcode(cq);
	o->len = ibv_wc_read_byte_len(cq);
	if (ibv_wc_read_wc_flags(cq) & IBV_WC_WITH_IMM) {
		o->has_imm = 1;
		o->imm = ntohl(ibv_wc_read_imm_data(cq));
	}
	if (ts == MPTX_TS_RAW) o->ts = ibv_wc_read_completion_ts(cq);
	else if (ts == MPTX_TS_WALLCLOCK) o->ts = ibv_wc_read_completion_wallclock_ns(cq);
}

// poll_ex polls an extended CQ one completion per ibv_start_poll /
// ibv_end_poll session. It never calls ibv_next_poll: rdma-core 44's rxe
// provider, when next_poll finds the queue empty, already stores the
// consumer index and drops the CQ lock itself, so the ibv_end_poll that
// ibv_create_cq_ex(3) prescribes after it advances the index a second time
// (past the producer: later polls return zeroed entries) and unlocks twice.
// A session per completion is correct for every provider and costs one
// lock round trip per completion.
static int poll_ex(struct ibv_cq_ex *cq, struct mptx_wc *out, int max, int ts, int idx) {
	struct ibv_poll_cq_attr attr;
	int n = 0;
	while (n < max) {
		memset(&attr, 0, sizeof(attr));
		int rc = ibv_start_poll(cq, &attr);
		if (rc == ENOENT) break;
		if (rc) return n > 0 ? n : -errno_of(rc);
		fill_ex(&out[n], cq, ts, idx);
		ibv_end_poll(cq);
		n++;
	}
	return n;
}

int mptx_srq_fill(struct ibv_srq *srq, struct ibv_recv_wr *chain, int batch, int n) {
	while (n > 0) {
		int k = n < batch ? n : batch;
		struct ibv_recv_wr *last = &chain[k - 1];
		struct ibv_recv_wr *saved = last->next;
		last->next = NULL;
		struct ibv_recv_wr *bad = NULL;
		errno = 0;
		int rc = ibv_post_srq_recv(srq, chain, &bad);
		last->next = saved;
		if (rc) return errno_of(rc);
		n -= k;
	}
	return 0;
}

int mptx_poll(struct mptx_cqset *set, struct mptx_wc *out, int max, struct ibv_wc *scratch) {
	int got = 0;
	int n = set->n;
	if (n <= 0 || max <= 0) return 0;
	int start = set->next;
	set->next = (start + 1) % n;
	for (int k = 0; k < n && got < max; k++) {
		int i = (start + k) % n;
		int r;
		if (set->cqx[i]) r = poll_ex(set->cqx[i], out + got, max - got, set->ts[i], i);
		else r = poll_plain(set->cq[i], out + got, max - got, scratch, i);
		if (r < 0) return r;
		if (r > 0 && set->srq[i]) {
			int e = mptx_srq_fill(set->srq[i], set->rwr[i], set->recv_batch, r);
			if (e) return -e;
		}
		got += r;
	}
	return got;
}

int mptx_arm(struct mptx_cqset *set) {
	for (int i = 0; i < set->n; i++) {
		int rc = ibv_req_notify_cq(set->cq[i], 0);
		if (rc) return errno_of(rc);
	}
	return 0;
}

int mptx_drain_cq_events(struct ibv_comp_channel *ch) {
	int n = 0;
	for (;;) {
		struct ibv_cq *cq = NULL;
		void *ctx = NULL;
		errno = 0;
		if (ibv_get_cq_event(ch, &cq, &ctx)) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) return n;
			return -(errno ? errno : EIO);
		}
		ibv_ack_cq_events(cq, 1);
		n++;
	}
}

int mptx_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a) {
	errno = 0;
	return errno_of(ibv_query_port(c, port, a));
}

struct ibv_mr *mptx_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
	return ibv_reg_mr(pd, addr, len, access);
}

struct ibv_device *mptx_dev_at(struct ibv_device **l, int i) { return l[i]; }

int mptx_query_device(struct ibv_context *c, struct ibv_device_attr_ex *a) {
	memset(a, 0, sizeof(*a));
	errno = 0;
	int rc = ibv_query_device_ex(c, NULL, a);
	if (rc == 0) return 0;
	memset(a, 0, sizeof(*a));
	errno = 0;
	return errno_of(ibv_query_device(c, &a->orig_attr));
}

struct ibv_cq_ex *mptx_create_cq_ex(struct ibv_context *c, int cqe, struct ibv_comp_channel *ch, int ts) {
	struct ibv_cq_init_attr_ex a;
	memset(&a, 0, sizeof(a));
	a.cqe = cqe;
	a.channel = ch;
	a.comp_vector = 0;
	a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM;
	if (ts == MPTX_TS_RAW) a.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	if (ts == MPTX_TS_WALLCLOCK) a.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	return ibv_create_cq_ex(c, &a);
}

struct ibv_cq *mptx_cq_ex_to_cq(struct ibv_cq_ex *cq) { return ibv_cq_ex_to_cq(cq); }

struct ibv_qp *mptx_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
                              struct ibv_srq *srq, uint32_t max_send_wr, uint32_t max_recv_wr,
                              uint32_t max_inline, struct ibv_qp_cap *out) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof(a));
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.srq = srq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	a.cap.max_send_wr = max_send_wr;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_wr = srq ? 0 : max_recv_wr;
	a.cap.max_recv_sge = srq ? 0 : 1;
	a.cap.max_inline_data = max_inline;
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (qp && out) *out = a.cap;
	return qp;
}

struct ibv_srq *mptx_create_srq(struct ibv_pd *pd, uint32_t max_wr) {
	struct ibv_srq_init_attr a;
	memset(&a, 0, sizeof(a));
	a.attr.max_wr = max_wr;
	a.attr.max_sge = 1;
	return ibv_create_srq(pd, &a);
}

int mptx_qp_init(struct ibv_qp *qp, uint8_t port, int access) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	a.qp_access_flags = access;
	errno = 0;
	return errno_of(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
}

// RoCE: the address vector is global (GRH) and names the peer by GID.
int mptx_qp_rtr(struct ibv_qp *qp, uint8_t port, int sgid_index, const uint8_t *dgid,
                uint32_t dqpn, uint32_t rq_psn, int mtu, uint32_t flow_label,
                uint8_t tclass, uint8_t hop_limit, uint8_t min_rnr_timer, uint8_t max_dest_rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = max_dest_rd_atomic;
	a.min_rnr_timer = min_rnr_timer;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)sgid_index;
	a.ah_attr.grh.hop_limit = hop_limit;
	a.ah_attr.grh.flow_label = flow_label;
	a.ah_attr.grh.traffic_class = tclass;
	a.ah_attr.port_num = port;
	errno = 0;
	return errno_of(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
}

int mptx_qp_rts(struct ibv_qp *qp, uint32_t sq_psn, uint8_t timeout, uint8_t retry_cnt,
                uint8_t rnr_retry, uint8_t max_rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = rnr_retry;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = max_rd_atomic;
	errno = 0;
	return errno_of(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
	                              IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
}

int mptx_qp_state(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	memset(&a, 0, sizeof(a));
	errno = 0;
	int rc = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
	if (rc) return -errno_of(rc);
	return (int)a.qp_state;
}

int mptx_qp_to_error(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	errno = 0;
	return errno_of(ibv_modify_qp(qp, &a, IBV_QP_STATE));
}

int mptx_qp_reset(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	errno = 0;
	return errno_of(ibv_modify_qp(qp, &a, IBV_QP_STATE));
}

int mptx_rate_limit(struct ibv_qp *qp, uint32_t kbps) {
	struct ibv_qp_rate_limit_attr a;
	memset(&a, 0, sizeof(a));
	a.rate_limit = kbps;
	errno = 0;
	return errno_of(ibv_modify_qp_rate_limit(qp, &a));
}

int mptx_bind_mw2(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr, uint64_t addr,
                  uint64_t len, int access, uint64_t wr_id, uint32_t *rkey) {
	struct ibv_send_wr w, *bad = NULL;
	memset(&w, 0, sizeof(w));
	w.wr_id = wr_id;
	w.opcode = IBV_WR_BIND_MW;
	w.send_flags = IBV_SEND_SIGNALED;
	w.bind_mw.mw = mw;
	w.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	w.bind_mw.bind_info.mr = mr;
	w.bind_mw.bind_info.addr = addr;
	w.bind_mw.bind_info.length = len;
	w.bind_mw.bind_info.mw_access_flags = access;
	errno = 0;
	int rc = ibv_post_send(qp, &w, &bad);
	if (rc) return errno_of(rc);
	*rkey = w.bind_mw.rkey;
	return 0;
}

int mptx_local_inv(struct ibv_qp *qp, uint32_t rkey, uint64_t wr_id) {
	struct ibv_send_wr w, *bad = NULL;
	memset(&w, 0, sizeof(w));
	w.wr_id = wr_id;
	w.opcode = IBV_WR_LOCAL_INV;
	w.send_flags = IBV_SEND_SIGNALED;
	w.invalidate_rkey = rkey;
	errno = 0;
	return errno_of(ibv_post_send(qp, &w, &bad));
}

// mptx_wait_one busy-polls a control CQ for one completion (set-up only:
// memory-window binds and invalidations). Returns 0 when one was polled,
// ETIMEDOUT after spins empty polls, or an errno.
int mptx_wait_one(struct ibv_cq *cq, long spins, uint64_t *wr_id, int *status) {
	struct ibv_wc wc;
	for (long i = 0; i < spins; i++) {
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0) return EIO;
		if (n == 1) {
			*wr_id = wc.wr_id;
			*status = wc.status;
			return 0;
		}
	}
	return ETIMEDOUT;
}

int mptx_rt_raw_clock(struct ibv_context *c, uint64_t *out) {
	struct ibv_values_ex v;
	memset(&v, 0, sizeof(v));
	v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
	errno = 0;
	int rc = ibv_query_rt_values_ex(c, &v);
	if (rc) return errno_of(rc);
	*out = (uint64_t)v.raw_clock.tv_sec * 1000000000ull + (uint64_t)v.raw_clock.tv_nsec;
	return 0;
}

int mptx_set_nonblock(int fd) {
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0) return errno;
	if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return errno;
	return 0;
}

int mptx_get_async(struct ibv_context *c, struct mptx_async *out) {
	struct ibv_async_event ev;
	errno = 0;
	if (ibv_get_async_event(c, &ev)) {
		if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
		return -(errno ? errno : EIO);
	}
	out->type = ev.event_type;
	out->qpn = 0;
	out->port = 0;
	switch (ev.event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		out->qpn = ev.element.qp ? ev.element.qp->qp_num : 0;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_GID_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
		out->port = ev.element.port_num;
		break;
	default:
		break;
	}
	ibv_ack_async_event(&ev);
	return 1;
}

package verbs

import (
	"strconv"

	"github.com/mptx-dev/mptx/qp"
)

// wcStatusNames are enum ibv_wc_status's values as ibv_wc_status_str(3)
// names them, indexed by value.
var wcStatusNames = [...]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory bind operation error",
	"bad response error", "local access error", "remote invalid request error",
	"remote access error", "remote operation error", "transport retry counter exceeded",
	"RNR retry counter exceeded", "local RDD violation error", "remote invalid RD request",
	"aborted error", "invalid EE context number", "invalid EE context state", "fatal error",
	"response timeout error", "general error",
}

// wcStatusString names an ibv_wc_status value.
func wcStatusString(s int) string {
	if s >= 0 && s < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "status " + strconv.Itoa(s)
}

// statusOf maps an ibv_wc_status value (ibv_poll_cq(3)) to qp.Status.
func statusOf(s int) qp.Status {
	switch s {
	case 0: // IBV_WC_SUCCESS
		return qp.StatusOK
	case 12: // IBV_WC_RETRY_EXC_ERR
		return qp.StatusRetryExceeded
	case 10: // IBV_WC_REM_ACCESS_ERR
		return qp.StatusRemoteAccess
	case 5: // IBV_WC_WR_FLUSH_ERR
		return qp.StatusFlushed
	case 1, 2, 4, 6, 8: // LOC_LEN, LOC_QP_OP, LOC_PROT, MW_BIND, LOC_ACCESS
		return qp.StatusLocal
	case 13: // IBV_WC_RNR_RETRY_EXC_ERR
		return qp.StatusRNRRetryExceeded
	}
	return qp.StatusFatal
}

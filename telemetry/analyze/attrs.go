package analyze

import (
	"strconv"

	"github.com/mptx-dev/mptx/telemetry/schema"
)

// value is a decoded attribute value: the types the analysis reads.
// Both decoders produce it: pdata's (valueOf) and the fast one.
type value struct {
	kind   byte // 's' string, 'i' int, 'd' double, 'b' bool, 'x' array, map or bytes, 0 empty
	str    string
	hasStr bool // str is pcommon.Value.AsString()'s text
	i      int64
	d      float64
}

// asString is pcommon.Value.AsString; ok is false when the fast decoder
// cannot produce it (doubles, arrays, maps: the line then goes to pdata).
func (v value) asString() (string, bool) {
	if v.kind == 'i' && v.str == "" {
		return strconv.FormatInt(v.i, 10), true
	}
	return v.str, v.hasStr
}

// asInt is intValue's rule on a decoded value.
func (v value) asInt() (int64, bool) {
	switch v.kind {
	case 'i':
		return v.i, true
	case 'd':
		return int64(v.d), true
	case 's':
		if n, err := strconv.ParseInt(v.str, 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

// Indices of the span attributes the analysis reads (attrIndex); 0 is
// any other.
const (
	aOther = iota
	aTransferID
	aTransferBytes
	aChunkSize
	aTransferChunks
	aPaths
	aCC
	aBackend
	aPeer
	aName
	aOutcome
	aErrorType
	aRecvChunks
	aRecvDuplicates
	aRecvQueueMax
	aRecvHandoffSum
	aRecvLastArrival
	aRecvLag
	aChunkIndex
	aPath
	aAttempt
	aChunkBytes
	aChunkECN
	aQPN
	aChunkRTT
	aDevice
	aNIC
	aRecvQueue
	aRecvWait
	aRecvHandoff
	aCount
)

// attrIndexOf returns the index of span attribute k, 0 for one the
// analysis does not read. A switch, not a map: it runs for every attribute
// of every span.
func attrIndexOf(k []byte) int {
	switch string(k) {
	case schema.AttrTransferID:
		return aTransferID
	case schema.AttrTransferBytes:
		return aTransferBytes
	case schema.AttrChunkSize:
		return aChunkSize
	case schema.AttrTransferChunks:
		return aTransferChunks
	case schema.AttrPaths:
		return aPaths
	case schema.AttrCC:
		return aCC
	case schema.AttrBackend:
		return aBackend
	case schema.AttrNetworkPeerAddress:
		return aPeer
	case schema.AttrTransferName:
		return aName
	case schema.AttrTransferOutcome, schema.AttrChunkOutcome:
		return aOutcome
	case schema.AttrErrorType:
		return aErrorType
	case schema.AttrRecvChunks:
		return aRecvChunks
	case schema.AttrRecvDuplicates:
		return aRecvDuplicates
	case schema.AttrRecvQueueMax:
		return aRecvQueueMax
	case schema.AttrRecvHandoffSum:
		return aRecvHandoffSum
	case schema.AttrRecvLastArrival:
		return aRecvLastArrival
	case schema.AttrRecvLag:
		return aRecvLag
	case schema.AttrChunkIndex:
		return aChunkIndex
	case schema.AttrPath:
		return aPath
	case schema.AttrAttempt:
		return aAttempt
	case schema.AttrChunkBytes:
		return aChunkBytes
	case schema.AttrChunkECN:
		return aChunkECN
	case schema.AttrQPN:
		return aQPN
	case schema.AttrChunkRTT:
		return aChunkRTT
	case schema.AttrDevice:
		return aDevice
	case schema.AttrNIC:
		return aNIC
	case schema.AttrRecvQueue:
		return aRecvQueue
	case schema.AttrRecvWait:
		return aRecvWait
	case schema.AttrRecvHandoff:
		return aRecvHandoff
	}
	return aOther
}

// attrIsString marks the attributes read as strings.
var attrIsString = [aCount]bool{aCC: true, aBackend: true, aPeer: true, aName: true, aOutcome: true, aErrorType: true, aDevice: true, aNIC: true}

// setAttr applies one span attribute (pdata's decoder).
func (r *spanRec) setAttr(k string, v value) bool { return r.setIdx(attrIndexOf([]byte(k)), v) }

// setIdx applies attribute idx; both decoders use it. It reports false
// when the value's string form is needed and unknown (the fast decoder
// then hands the line to pdata).
func (r *spanRec) setIdx(idx int, v value) bool {
	if attrIsString[idx] {
		s, ok := v.asString()
		if !ok {
			return false
		}
		switch idx {
		case aCC:
			r.cc = s
		case aBackend:
			r.backend = s
		case aPeer:
			r.peer = s
		case aName:
			r.name = s
		case aOutcome:
			r.outcome = s
		case aErrorType:
			r.errType = s
		case aDevice:
			r.device = s
		case aNIC:
			r.nic = s
		}
		return true
	}
	n, ok := v.asInt()
	switch idx {
	case aTransferID:
		r.id, r.hasID = n, ok
	case aTransferBytes:
		r.bytes = n
	case aChunkSize:
		r.chunkSize = n
	case aTransferChunks:
		r.chunks = n
	case aPaths:
		r.paths = n
	case aRecvChunks:
		r.recvChunks = n
	case aRecvDuplicates:
		r.dups = n
	case aRecvQueueMax:
		r.queueMax = n
	case aRecvHandoffSum:
		r.handoffSum = n
	case aRecvLastArrival:
		r.lastArrival, r.hasArrival = n, ok
	case aRecvLag:
		r.lag = n
	case aChunkIndex:
		r.index = n
	case aPath:
		r.path, r.hasPath = n, ok
	case aAttempt:
		r.attempt = n
	case aChunkBytes:
		r.chunkBytes = n
	case aChunkECN:
		r.ecn = n
	case aQPN:
		r.qpn = n
	case aChunkRTT:
		r.rtt = n
	case aRecvQueue:
		r.queue = n
	case aRecvWait:
		r.wait = n
	case aRecvHandoff:
		r.handoff = n
	}
	return true
}

// Package bootstrap is the TCP control channel that sets up an mptx verbs
// connection: mutual authentication with a shared secret, then the exchange
// of everything two RC queue-pair sets need to connect (QPNs, PSNs, GIDs,
// MTU, flow labels, the receive region's address and rkeys, capabilities),
// and, after the transfer, the receiver's receipt.
//
// # Authentication
//
// The protocol is an HMAC-SHA256 challenge-response (RFC 2104) in both
// directions, so neither side proves anything to an impostor and neither
// sends anything secret. The HMAC key is not the secret itself but
// k = HKDF-SHA256(secret, salt "mptx/2", info "handshake tags"), 32 bytes
// (RFC 5869), so the key is this protocol's alone (qp/tcp derives another
// from the same secret):
//
//  1. server → client: Hello{magic "MPTX", version (3; the key schedule and
//     its "mptx/2" labels are version 2's, version 3 numbers path resets),
//     nonceS (32 random bytes)}
//  2. client → server: nonceC (32 random bytes),
//     HMAC(k, "mptx/2 client" ‖ nonceS ‖ nonceC)
//  3. server: verifies the tag in constant time (crypto/hmac.Equal). On a
//     mismatch it writes one reject byte and closes: the client has learned
//     nothing but "rejected", and no queue pair or memory window was created
//     (the server creates them only after step 3). On a match it writes an
//     accept byte and HMAC(k, "mptx/2 server" ‖ nonceC ‖ nonceS).
//  4. client: verifies the server's tag, so a client never hands its QPNs to
//     a server that does not know the secret either.
//
// Both sides then derive a session key
// ks = HKDF-SHA256(secret, salt nonceS ‖ nonceC, info "mptx/2 session"),
// and every later frame carries HMAC(ks, direction ‖ sequence ‖ type ‖
// payload): a frame that was altered, replayed, reordered or reflected
// fails with ErrIntegrity. The frames are not encrypted; their contents
// (QPNs, rkeys, GIDs) travel in clear in every RoCEv2 packet anyway.
//
// # Secrets
//
// The secret must be random, not a password: at least 128 bits of
// entropy, such as 16 or more bytes from a cryptographic random source
// (32 recommended; `head -c 32 /dev/urandom | base64` makes one).
// MinSecret checks only the length. Anyone who sees one handshake (an
// eavesdropper, or a fake server that a client dials: the client sends its
// tag in step 2 before it can check the server's) can test guesses of the
// secret offline against the tag, at the speed of HKDF and HMAC, which
// have no work factor; a secret with less entropy than a brute force can
// exhaust gives no protection.
//
// # Deadlines
//
// Every read and write takes its deadline from the context passed to the
// call; Client and Server bound authentication by DefaultHandshakeTimeout
// when the context has none. Listener runs the server side for many
// clients at once, each step under ListenConfig.HandshakeTimeout, so a
// client that goes silent, before or after authenticating, is dropped
// without delaying anyone else (see Listener).
//
// # Frames
//
// A frame is [length uint32][type uint8][payload][tag 32 bytes], big endian,
// payload at most MaxPayload bytes. Messages: Offer (client → server),
// Accept (server → client), Ready (client → server), Transfer (client →
// server), TransferAck (server → client), Receipt (server → client) and
// Abort (either way). The sequence of a connection is Offer, Accept, Ready;
// then per transfer Transfer, TransferAck (the sender posts only after it),
// and, when the receiver has every byte, Receipt.
//
// During a transfer the sender may also send ResetPath, answered by
// ResetAck, to bring a path's queue pair back from the error state. Each
// ResetPath carries the number of the reset (Seq) and its ResetAck echoes
// it: the sender drops the late answer of a reset that timed out rather
// than take it for a later reset's.
//
// A Session's sends may come from several goroutines; its receives must
// come from one. A write sets only the write deadline and a read only the
// read deadline, so a write that times out does not fail a concurrent
// read.
//
// # Sharing the channel
//
// An mptx session (the root package) runs its own protocol on this channel
// in application frames (TypeApp and up: WriteApp, ReadApp; a Listener
// with AppHello hands over the first one). Over verbs the same channel also
// carries the verbs connection's frames (ResetPath, ResetAck) for the
// connection's lifetime. Mux lets them share it: one goroutine reads every
// frame and routes it by type to the consumer that registered for it.
// The verbs set-up exchange (Offer, Accept, Ready) runs on the Session
// before the Mux starts; a frame of another type than the one awaited is
// a *FrameError carrying it, which is how a session that gives up on verbs
// tells its peer to fall back to TCP.
package bootstrap

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
// sends anything secret:
//
//  1. server → client: Hello{magic "MPTX", version, nonceS (32 random bytes)}
//  2. client → server: nonceC (32 random bytes),
//     HMAC(secret, "mptx/1 client" ‖ nonceS ‖ nonceC)
//  3. server: verifies the tag in constant time (crypto/hmac.Equal). On a
//     mismatch it writes one reject byte and closes: the client has learned
//     nothing but "rejected", and no queue pair or memory window was created
//     (the server creates them only after step 3). On a match it writes an
//     accept byte and HMAC(secret, "mptx/1 server" ‖ nonceC ‖ nonceS).
//  4. client: verifies the server's tag, so a client never hands its QPNs to
//     a server that does not know the secret either.
//
// Both sides then derive a session key
// k = HMAC(secret, "mptx/1 session" ‖ nonceS ‖ nonceC), and every later
// frame carries HMAC(k, direction ‖ sequence ‖ type ‖ payload): a frame that
// was altered, replayed, reordered or reflected fails with ErrIntegrity. The
// frames are not encrypted; their contents (QPNs, rkeys, GIDs) travel in
// clear in every RoCEv2 packet anyway.
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
// ResetAck, to bring a path's queue pair back from the error state.
//
// A Session's sends may come from several goroutines; its receives must
// come from one. Deadlines come from the context passed to each call.
package bootstrap

// Package sealserver is a local Seal key server: one master key behind the
// real server's HTTP API, for devnets and tests (three of them make a 2-of-3
// committee of independent servers).
//
//   - POST /v1/fetch_key verifies a request exactly as Seal's key server
//     does, in its order: the seal_approve PTB (every command a MoveCall to
//     one package and a seal_approve* function, the first argument a pure
//     vector<u8> ID), the package, the certificate's TTL (≤ 30 minutes) and
//     creation time (not in the future, not expired), the user's Sui
//     personal-message signature over the exact session message, and the
//     session key's signature over the BCS signed request. It then answers
//     the user secret key of every requested identity, ElGamal-encrypted to
//     the request's key.
//   - GET /v1/service returns the proof of possession of the master key for
//     the server's object ID, which the SDK checks.
//   - Errors are {"error": Kind, "message": …} with the real status codes
//     (403 NoAccess, InvalidPTB, InvalidCertificate, InvalidSignature,
//     InvalidSessionSignature, InvalidMVRName; 400 MissingRequiredHeader,
//     InvalidSDKVersion, InvalidServiceId, UnsupportedPackageId); bodies the
//     JSON extractor refuses get axum's 400/413/415/422 text answers. Every
//     answer carries X-KeyServer-Version.
//
// Differences from the real server, by design: the Move dry run of
// seal_approve is replaced by a native [Policy] ([Open], [Allowlist] of Sui
// addresses, or any function of the requester, package and IDs); there is
// no Sui node, so packages are their own first version, MVR names are
// refused, and only Ed25519 user signatures verify. [Server.ListenAndServe]
// binds loopback addresses only unless told otherwise.
package sealserver

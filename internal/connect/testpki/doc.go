// Package testpki writes a throw-away certificate authority, server and
// client certificates for tests of TLS connections, so that no test depends
// on certificates checked in or downloaded.
//
// Invariants: every file lives in the test's temporary directory; the
// certificates are valid for an hour around now, for 127.0.0.1 and
// localhost; OtherCA signed nothing, so trusting it alone must fail the
// handshake with "x509: certificate signed by unknown authority".
package testpki

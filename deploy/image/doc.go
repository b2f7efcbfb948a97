// Command image builds Sundial's container image without a container engine
// and writes it as a tarball that `docker load` and `podman load` read
// (`make image` writes dist/sundial-image.tar).
//
// The image is built FROM scratch, because no base image can be pulled where
// it is built: one layer holds the statically linked sundial binary, the CA
// bundle of the building host and the account files of one non-root user.
//
// Invariants of every image it writes:
//   - It runs as user and group 65532 (sundial), given as numbers so that
//     Kubernetes' runAsNonRoot can check them without reading /etc/passwd.
//   - It holds no shell and no other program: the entrypoint,
//     /usr/local/bin/sundial, is the only executable. A binary that needs a
//     dynamic loader or shared libraries is refused, since the image has none.
//   - It is reproducible: every file and the image itself carry the time
//     given (-created), and files are written in a fixed order with fixed
//     owners, so the same binary and bundle give the same digest.
package main

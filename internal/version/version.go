package version

// Version is the release this tree is, or will become: "-dev" until it is
// tagged v<Version without -dev>.
const Version = "0.1.0-dev"

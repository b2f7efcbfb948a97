// Package configfile is the one home of the rule by which Sundial's
// settings are named and read, shared by the command line (cmd/sundial)
// and the worker SDK (package worker):
//
//   - The setting "foo-bar" is the flag --foo-bar, the environment variable
//     SUNDIAL_FOO_BAR (EnvName) and the key foo-bar of the YAML file.
//   - The file is the one --config names on the command line (-config,
//     --config=FILE; scanning stops at "--"), else SUNDIAL_CONFIG (Path).
//   - A key at the file's top level applies to every program that has the
//     setting; a key under a section (a mapping named after a command,
//     "runner", "dag engine", or WorkerSection for the SDK) applies to that
//     program only, and wins over the top level (File.Lookup).
//   - A value is a scalar, or a list, which reads as the flag's
//     comma-separated form; a key without a value, a list of lists or a
//     mapping below a section is an error naming the key (Load). Nothing
//     is ignored silently: Load reports every bad key at once.
//   - A flag wins over the environment, which wins over the file, which
//     wins over the default; the programs apply this order.
//
// The package does no I/O but reading the named file, and holds no state.
package configfile

package client

import (
	"io"
	"iter"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// DecodeSpecs reads job definitions from a file's content as they come, so
// an input of any size is never held whole: JSON arrays of JobSpecs, a
// stream of JSON JobSpecs, or YAML documents separated by "---", in the
// JobSpec's protobuf JSON form or the readable forms people write (short
// enum names, Go and ISO 8601 durations). It is jobspec.DecodeFile, the one
// place job files are decoded; see it for the rules and the errors.
func DecodeSpecs(r io.Reader) iter.Seq2[*sundialv1.JobSpec, error] {
	return jobspec.DecodeFile(r)
}

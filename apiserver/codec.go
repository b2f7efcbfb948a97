package apiserver

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// strictJSON is the API's JSON codec. Unlike Connect's default it refuses
// unknown fields: a misspelt field of a hand-written request would
// otherwise be dropped silently, and a definition applied without it.
// The price is that a client must not send fields this server's schema
// does not have, which the binary protobuf codec still tolerates.
type strictJSON struct{ name string }

func (c strictJSON) Name() string { return c.name }

func (c strictJSON) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("json codec: %T is not a protobuf message", message)
	}
	return protojson.Marshal(m)
}

func (c strictJSON) Unmarshal(data []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("json codec: %T is not a protobuf message", message)
	}
	if len(data) == 0 {
		return errors.New("an empty body is not a JSON object: send {} for an empty request")
	}
	return protojson.Unmarshal(data, m)
}

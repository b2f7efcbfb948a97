package client

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// ApplyDag produces a DAG definition: JSON keyed by the DAG id, with the
// header sundial-kind: dag, to the topic TopicFor gives its owner team. It
// is the one framing of DAG records (the CLI, the API and the embedded
// pipeline use it). The DAG engine validates and answers (WaitStatus);
// callers that want the engine's rules checked before producing run
// dag.Compile first, which this library package does not link.
func (c *Client) ApplyDag(ctx context.Context, spec *sundialv1.DagSpec) (Receipt, error) {
	value, err := sundialv1.EncodingJSON.Marshal(spec)
	if err != nil {
		return Receipt{}, fmt.Errorf("encode DAG %q: %w", spec.GetId(), err)
	}
	topic, err := c.TopicFor(spec.GetOwnerTeam())
	if err != nil {
		return Receipt{}, fmt.Errorf("DAG %q: %w", spec.GetId(), err)
	}
	rs, err := c.produce(ctx, "produce DAG", []*kgo.Record{{Topic: topic, Key: []byte(spec.GetId()), Value: value, Headers: []kgo.RecordHeader{
		{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindDag)},
		{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeJSON)},
	}}})
	if err != nil {
		return Receipt{}, err
	}
	return rs[0], nil
}

// DeleteDag produces the DAG's tombstone (header sundial-kind: dag) to the
// topic of the team WithTeam put in ctx (the stored owner), else of the
// team its id starts with.
func (c *Client) DeleteDag(ctx context.Context, id string) (Receipt, error) {
	topic, err := c.deleteTopic(ctx, id)
	if err != nil {
		return Receipt{}, fmt.Errorf("delete DAG %q: %w", id, err)
	}
	rs, err := c.produce(ctx, "delete DAG", []*kgo.Record{{Topic: topic, Key: []byte(id), Headers: []kgo.RecordHeader{
		{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindDag)},
	}}})
	if err != nil {
		return Receipt{}, err
	}
	return rs[0], nil
}

package apiserver

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
)

// Page sizes of listings.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// cursor is what a page token carries: where the next page starts and the
// filter it was issued for, so that a token is not reused with another.
type cursor struct {
	// After is the id of the last item of the previous page.
	After string `json:"a"`
	// Filter is a hash of the request's filter and search text.
	Filter uint64 `json:"f"`
}

// pageSize reads a PageRequest's size.
func pageSize(p *apiv1.PageRequest) (int, error) {
	switch n := p.GetSize(); {
	case n == 0:
		return DefaultPageSize, nil
	case n > MaxPageSize:
		return 0, connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("page.size %d: must be at most %d", n, MaxPageSize))
	default:
		return int(n), nil
	}
}

// filterHash fingerprints what a listing selects.
func filterHash(filter *apiv1.DefinitionFilter, text string) uint64 {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(filter) // a valid message always encodes
	h := fnv.New64a()
	_, _ = h.Write(b)
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(text))
	return h.Sum64()
}

// decodeToken reads a page token issued for the filter hash want; "" is
// the first page.
func decodeToken(token string, want uint64) (string, error) {
	if token == "" {
		return "", nil
	}
	bad := func(reason string) error {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("page.token: %s", reason))
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", bad("not a token this API issued")
	}
	var c cursor
	if err := json.Unmarshal(raw, &c); err != nil || c.After == "" {
		return "", bad("not a token this API issued")
	}
	if c.Filter != want {
		return "", bad("issued for another filter: repeat the first request's filter, or start again without a token")
	}
	return c.After, nil
}

// encodeToken issues the token of the page after the item after.
func encodeToken(after string, filter uint64) string {
	raw, _ := json.Marshal(cursor{After: after, Filter: filter}) // a struct of a string and a number always encodes
	return base64.RawURLEncoding.EncodeToString(raw)
}

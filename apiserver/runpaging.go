package apiserver

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"

	"google.golang.org/protobuf/proto"
)

// pageToken returns the token of the page that starts at offset in the
// list that key (the request without its paging fields) selects. The
// token carries a digest of key, so that it is refused with other filters
// instead of paging through another list. Offsets are not stable when the
// list changes between pages: a run recorded meanwhile shifts the pages by
// one, which a console tolerates better than a cursor the history cannot
// seek to.
func pageToken(key proto.Message, offset int) string {
	b := binary.AppendUvarint(nil, uint64(offset))
	b = append(b, pageKeyDigest(key)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parsePageToken returns the offset of a token pageToken made for key.
func parsePageToken(key proto.Message, tok string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, errors.New("page_token: not a token this service issued")
	}
	offset, n := binary.Uvarint(b)
	if n <= 0 || offset > 1<<31 || string(b[n:]) != string(pageKeyDigest(key)) {
		return 0, errors.New("page_token: not a token of this list (were the filters changed?)")
	}
	return int(offset), nil
}

func pageKeyDigest(key proto.Message) []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(key)
	h := sha256.Sum256(b)
	return h[:8]
}

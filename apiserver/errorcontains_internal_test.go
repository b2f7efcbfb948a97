package apiserver

import "testing"

func TestErrorContains(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err, text string
		want      bool
	}{
		{"", "", true},
		{"http_503: upstream down", "", true},
		{"http_503: upstream down", "UPSTREAM", true},
		{"http_503: upstream down", "503", true},
		{"http_503: upstream down", "timeout", false},
		{"", "x", false},
	}
	for _, c := range cases {
		if got := errorContains(c.err, c.text); got != c.want {
			t.Errorf("errorContains(%q, %q) = %v, want %v", c.err, c.text, got, c.want)
		}
	}
}

// Package startoffsets finds where to start reading a topic so that no
// record stamped from a given instant on is missed.
//
// # Invariant
//
// Reading each partition of the topic from the offsets Since returns yields
// every record stamped at or after since, including records appended while
// Since looks the offsets up. It may also yield a few records stamped
// earlier (appended out of timestamp order); readers filter those if they
// care.
//
// # Why not kgo's AfterMilli offset
//
// A lookup by time finds nothing in a partition holding no record from since
// on, and franz-go's AfterMilli start offset (like kadm's
// ListOffsetsAfterMilli) then falls back on the partition's end, looked up
// alongside or after the lookup by time. A record appended between the two
// lookups lies before that end and is skipped for good. Since looks the ends
// up first: every record appended later is at or after them, and every
// record between an end and what the later lookup by time finds is stamped
// before since. Each partition starts at the smaller of the two.
package startoffsets

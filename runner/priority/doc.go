// Package priority decides which fetched run a free worker takes next, across
// the three priority topics.
//
// Each priority has a FIFO queue of fetched records. A pick is a smooth
// weighted round robin over the non-empty queues (the scheme nginx uses for
// upstream weights): with weights 6:3:1 and all three queues busy, ten picks
// take six high, three default and one low, interleaved, so a flood of high
// priority runs slows low priority ones down but never stops them.
//
// Aging raises a queue's weight with the waiting time of its oldest record:
// the effective weight is weight * (1 + wait/Aging). A low priority record
// that has waited 5*Aging counts as much as a fresh high priority one, so
// lateness, not only rank, decides once a queue has fallen behind.
//
// Within a priority, items are grouped (the runner groups runs by owning
// team), each group in a FIFO lane, and the lanes take turns, one item each:
// a group's flood delays another group's items by the turns of the groups
// ahead of them, never by the length of the flood. Aging applies to the
// level's oldest item, whichever its lane. CappedLen counts a level's items
// with at most so many per group, so that a caller can bound what one group
// may hold against everyone's buffer.
//
// A Queues is pure: it takes the time as an argument and is not safe for
// concurrent use (the runner guards it).
package priority

package enqueue

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/topics"
)

// Partitioner returns the partitioner a client given to New must use:
// records of names.Shards() go to the partition set in Record.Partition (the
// shard enqueue computed; a partition the topic does not have fails the
// record), and every other topic is partitioned by others. A nil others means
// franz-go's default partitioner, which hashes keys like the Java client, so
// the client can still produce runs and events keyed by job id.
func Partitioner(names topics.Names, others kgo.Partitioner) kgo.Partitioner {
	if others == nil {
		// kgo's default (see kgo.RecordPartitioner).
		others = kgo.UniformBytesPartitioner(64<<10, true, true, nil)
	}
	return &partitioner{shards: names.Shards(), manual: kgo.ManualPartitioner(), others: others}
}

type partitioner struct {
	shards string
	manual kgo.Partitioner
	others kgo.Partitioner
}

func (p *partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == p.shards {
		return p.manual.ForTopic(topic)
	}
	return p.others.ForTopic(topic)
}

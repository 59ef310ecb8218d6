// Which forward a call belongs to. It travels with the forward (AttentionContext's alternatives
// name theirs, the plan hands it to every layer, the LM head takes it as an argument), never in
// thread state and never from grad mode, so a trainer's forwards with and without grad agree
// bit for bit.
#ifndef LOCKSTEP_MODEL_FORWARD_KIND_H_
#define LOCKSTEP_MODEL_FORWARD_KIND_H_

namespace lockstep {

enum class ForwardKind {
  // Whole sequences, causal within each, no cache: a trainer's forward (with or without grad)
  // and any forward over TrainingAttention.
  kTraining,
  // Continues sequences from a KV cache (PagedAttention): the generator's steps, prefill and
  // decode. Fast mode runs our linear kernel here at every size (ops::Linear says why).
  kPaged,
};

}  // namespace lockstep

#endif  // LOCKSTEP_MODEL_FORWARD_KIND_H_

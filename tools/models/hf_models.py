"""PyTorch re-implementations of Hugging Face transformer models for the onnxforge test zoo.

Module names, class names and forward math mirror transformers' eager implementations
(BertModel, RobertaModel, DistilBertModel, GPT2Model, GPT2LMHeadModel, LlamaForCausalLM, PhiForCausalLM,
GemmaForCausalLM, WhisperEncoder,
DeiTForImageClassificationWithTeacher, MobileViTForImageClassification, Wav2Vec2Model) so that the
TorchScript exporter writes the same scope paths into node names as a real HF export
(`/encoder/layer.0/attention/self/query/MatMul`). Dropout is kept (identity in eval mode); the
causal LMs take optimum's flat KV-cache layout (past_key_values.N.key/value in, present.N.* out);
head masks and output_attentions are left out. Weights are initialised like HF's
`_init_weights` (normal(0, initializer_range), LayerNorm ones/zeros).
"""
from __future__ import annotations

import math

import torch
from torch import nn


# ----------------------------------------------------------------------------- activations
class GELUActivation(nn.Module):
    """transformers.activations.GELUActivation (exact erf GELU)."""

    def forward(self, x):
        return nn.functional.gelu(x)


class NewGELUActivation(nn.Module):
    """transformers.activations.NewGELUActivation (GPT-2's tanh approximation)."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _init_weights(model: nn.Module, std: float) -> None:
    for m in model.modules():
        if isinstance(m, (nn.Linear, Conv1D)):
            m.weight.data.normal_(0.0, std)
            if m.bias is not None:
                m.bias.data.zero_()
        elif isinstance(m, nn.Embedding):
            m.weight.data.normal_(0.0, std)
            if m.padding_idx is not None:
                m.weight.data[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            m.weight.data.fill_(1.0)
            m.bias.data.zero_()


def _extended_attention_mask(attention_mask, dtype):
    """ModuleUtilsMixin.get_extended_attention_mask for a 2-D padding mask."""
    extended = attention_mask[:, None, None, :]
    extended = extended.to(dtype=dtype)
    return (1.0 - extended) * torch.finfo(dtype).min


# ----------------------------------------------------------------------------- BERT
class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["hidden_size"], padding_idx=c.get("pad_token_id", 0))
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["hidden_size"])
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c.get("layer_norm_eps", 1e-12))
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(c["max_position_embeddings"]).expand((1, -1)), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long), persistent=False)

    def forward(self, input_ids):
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        position_ids = self.position_ids[:, :seq_length]
        buffered_token_type_ids = self.token_type_ids[:, :seq_length]
        token_type_ids = buffered_token_type_ids.expand(input_shape[0], seq_length)
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.position_embeddings(position_ids)
        embeddings += position_embeddings
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c["num_attention_heads"]
        self.attention_head_size = c["hidden_size"] // c["num_attention_heads"]
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        bias = c.get("qkv_bias", True)
        self.query = nn.Linear(c["hidden_size"], self.all_head_size, bias=bias)
        self.key = nn.Linear(c["hidden_size"], self.all_head_size, bias=bias)
        self.value = nn.Linear(c["hidden_size"], self.all_head_size, bias=bias)
        self.dropout = nn.Dropout(0.1)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None):
        mixed_query_layer = self.query(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(mixed_query_layer)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        return context_layer.view(new_context_layer_shape)


class BertSelfOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c.get("layer_norm_eps", 1e-12))
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return self.LayerNorm(hidden_states + input_tensor)


class BertAttention(nn.Module):
    SelfAttention, SelfOutput = BertSelfAttention, BertSelfOutput  # RoBERTa: its own classes

    def __init__(self, c):
        super().__init__()
        self.self = self.SelfAttention(c)
        self.output = self.SelfOutput(c)

    def forward(self, hidden_states, attention_mask):
        self_outputs = self.self(hidden_states, attention_mask)
        return self.output(self_outputs, hidden_states)


class BertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])
        self.intermediate_act_fn = GELUActivation()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["intermediate_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c.get("layer_norm_eps", 1e-12))
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return self.LayerNorm(hidden_states + input_tensor)


class BertLayer(nn.Module):
    Attention, Intermediate, Output = BertAttention, BertIntermediate, BertOutput

    def __init__(self, c):
        super().__init__()
        self.attention = self.Attention(c)
        self.intermediate = self.Intermediate(c)
        self.output = self.Output(c)

    def forward(self, hidden_states, attention_mask):
        attention_output = self.attention(hidden_states, attention_mask)
        intermediate_output = self.intermediate(attention_output)  # feed_forward_chunk
        return self.output(intermediate_output, attention_output)


class BertEncoder(nn.Module):
    Layer = BertLayer

    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([self.Layer(c) for _ in range(c["num_hidden_layers"])])

    def forward(self, hidden_states, attention_mask):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask)
        return hidden_states


class BertPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        first_token_tensor = hidden_states[:, 0]
        return self.activation(self.dense(first_token_tensor))


class BertModel(nn.Module):
    Embeddings, Encoder, Pooler = BertEmbeddings, BertEncoder, BertPooler

    def __init__(self, c):
        super().__init__()
        self.embeddings = self.Embeddings(c)
        self.encoder = self.Encoder(c)
        self.pooler = self.Pooler(c)
        _init_weights(self, 0.02)

    def forward(self, input_ids, attention_mask):
        embedding_output = self.embeddings(input_ids)
        extended_attention_mask = _extended_attention_mask(attention_mask, embedding_output.dtype)
        sequence_output = self.encoder(embedding_output, extended_attention_mask)
        pooled_output = self.pooler(sequence_output)
        return sequence_output, pooled_output


# ----------------------------------------------------------------------------- RoBERTa
def create_position_ids_from_input_ids(input_ids, padding_idx, past_key_values_length=0):
    """modeling_roberta: positions count non-padding tokens from padding_idx + 1; padding
    tokens get padding_idx (whose embedding row is the padding row)."""
    mask = input_ids.ne(padding_idx).int()
    incremental_indices = (torch.cumsum(mask, dim=1).type_as(mask) + past_key_values_length) * mask
    return incremental_indices.long() + padding_idx


class RobertaEmbeddings(BertEmbeddings):
    """BertEmbeddings with RoBERTa's position ids (cumulative sum of the non-padding mask,
    offset by padding_idx + 1) and one token type (type_vocab_size 1, never an input)."""

    def __init__(self, c):
        super().__init__(c)
        self.padding_idx = c["pad_token_id"]
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["hidden_size"],
                                                padding_idx=self.padding_idx)

    def forward(self, input_ids):
        position_ids = create_position_ids_from_input_ids(input_ids, self.padding_idx)
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        buffered_token_type_ids = self.token_type_ids[:, :seq_length]
        token_type_ids = buffered_token_type_ids.expand(input_shape[0], seq_length)
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.position_embeddings(position_ids)
        embeddings += position_embeddings
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


class RobertaSelfAttention(BertSelfAttention):
    pass


class RobertaSelfOutput(BertSelfOutput):
    pass


class RobertaAttention(BertAttention):
    SelfAttention, SelfOutput = RobertaSelfAttention, RobertaSelfOutput


class RobertaIntermediate(BertIntermediate):
    pass


class RobertaOutput(BertOutput):
    pass


class RobertaLayer(BertLayer):
    Attention, Intermediate, Output = RobertaAttention, RobertaIntermediate, RobertaOutput


class RobertaEncoder(BertEncoder):
    Layer = RobertaLayer


class RobertaPooler(BertPooler):
    pass


class RobertaModel(BertModel):
    """RobertaModel (add_pooling_layer=True): BERT's encoder with RoBERTa's embeddings."""
    Embeddings, Encoder, Pooler = RobertaEmbeddings, RobertaEncoder, RobertaPooler


# ----------------------------------------------------------------------------- DistilBERT
class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["dim"], padding_idx=0)
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["dim"])
        self.LayerNorm = nn.LayerNorm(c["dim"], eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(c["max_position_embeddings"]).expand((1, -1)), persistent=False)

    def forward(self, input_ids):
        input_embeds = self.word_embeddings(input_ids)
        seq_length = input_embeds.size(1)
        position_ids = self.position_ids[:, :seq_length]
        position_embeddings = self.position_embeddings(position_ids)
        embeddings = input_embeds + position_embeddings
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads = c["n_heads"]
        self.dim = c["dim"]
        self.dropout = nn.Dropout(p=0.1)
        self.q_lin = nn.Linear(c["dim"], c["dim"])
        self.k_lin = nn.Linear(c["dim"], c["dim"])
        self.v_lin = nn.Linear(c["dim"], c["dim"])
        self.out_lin = nn.Linear(c["dim"], c["dim"])

    def forward(self, query, key, value, mask):
        bs, q_length, dim = query.size()
        k_length = key.size(1)
        dim_per_head = self.dim // self.n_heads
        mask_reshp = (bs, 1, 1, k_length)

        def shape(x):
            return x.view(bs, -1, self.n_heads, dim_per_head).transpose(1, 2)

        def unshape(x):
            return x.transpose(1, 2).contiguous().view(bs, -1, self.n_heads * dim_per_head)

        q = shape(self.q_lin(query))
        k = shape(self.k_lin(key))
        v = shape(self.v_lin(value))
        q = q / math.sqrt(dim_per_head)
        scores = torch.matmul(q, k.transpose(2, 3))
        mask = (mask == 0).view(mask_reshp).expand_as(scores)
        scores = scores.masked_fill(mask, torch.tensor(torch.finfo(scores.dtype).min))
        weights = nn.functional.softmax(scores, dim=-1)
        weights = self.dropout(weights)
        context = unshape(torch.matmul(weights, v))
        return self.out_lin(context)


class FFN(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dropout = nn.Dropout(p=0.1)
        self.lin1 = nn.Linear(c["dim"], c["hidden_dim"])
        self.lin2 = nn.Linear(c["hidden_dim"], c["dim"])
        self.activation = GELUActivation()

    def forward(self, x):
        x = self.lin1(x)
        x = self.activation(x)
        x = self.lin2(x)
        return self.dropout(x)


class TransformerBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = MultiHeadSelfAttention(c)
        self.sa_layer_norm = nn.LayerNorm(c["dim"], eps=1e-12)
        self.ffn = FFN(c)
        self.output_layer_norm = nn.LayerNorm(c["dim"], eps=1e-12)

    def forward(self, x, attn_mask):
        sa_output = self.attention(x, x, x, attn_mask)
        sa_output = self.sa_layer_norm(sa_output + x)
        ffn_output = self.ffn(sa_output)
        return self.output_layer_norm(ffn_output + sa_output)


class Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_layers = c["n_layers"]
        self.layer = nn.ModuleList([TransformerBlock(c) for _ in range(c["n_layers"])])

    def forward(self, x, attn_mask):
        hidden_state = x
        for layer_module in self.layer:
            hidden_state = layer_module(hidden_state, attn_mask)
        return hidden_state


class DistilBertModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = Embeddings(c)
        self.transformer = Transformer(c)
        _init_weights(self, 0.02)

    def forward(self, input_ids, attention_mask):
        embeddings = self.embeddings(input_ids)
        return (self.transformer(embeddings, attention_mask),)


# ----------------------------------------------------------------------------- GPT-2
class Conv1D(nn.Module):
    """transformers.pytorch_utils.Conv1D: a Linear with transposed weight [nx, nf], via addmm."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        max_positions = c["n_positions"]
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(1, 1, max_positions, max_positions),
            persistent=False,
        )
        self.embed_dim = c["n_embd"]
        self.num_heads = c["n_head"]
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)

    def _attn(self, query, key, value, attention_mask):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)
        return torch.matmul(attn_weights, value)

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def forward(self, hidden_states, attention_mask, layer_past=None):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        if layer_past is not None:
            past_key, past_value = layer_past
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)
        attn_output = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        return attn_output if layer_past is None else (attn_output, (key, value))


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, c):
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, c["n_embd"])
        self.c_proj = Conv1D(c["n_embd"], intermediate_size)
        self.act = NewGELUActivation()
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        return self.dropout(hidden_states)


class GPT2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        hidden_size = c["n_embd"]
        self.ln_1 = nn.LayerNorm(hidden_size, eps=1e-5)
        self.attn = GPT2Attention(c)
        self.ln_2 = nn.LayerNorm(hidden_size, eps=1e-5)
        self.mlp = GPT2MLP(4 * hidden_size, c)

    def forward(self, hidden_states, attention_mask, layer_past=None):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output = self.attn(hidden_states, attention_mask, layer_past)
        present = None
        if layer_past is not None:
            attn_output, present = attn_output
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        return hidden_states if present is None else (hidden_states, present)


class GPT2Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_dim = c["n_embd"]
        self.wte = nn.Embedding(c["vocab_size"], self.embed_dim)
        self.wpe = nn.Embedding(c["n_positions"], self.embed_dim)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList([GPT2Block(c) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(self.embed_dim, eps=1e-5)
        _init_weights(self, 0.02)
        # GPT2PreTrainedModel._init_weights: scaled init of residual projections
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                p.data.normal_(0.0, 0.02 / math.sqrt(2 * c["n_layer"]))

    def forward(self, input_ids, attention_mask, position_ids=None, past_key_values=None):
        """With past_key_values ((key, value) per layer, [batch, heads, past_sequence, head_dim]):
        returns (hidden_states, presents); the causal mask is the `bias` buffer's rows
        past..past+sequence, so past + sequence must stay within n_positions."""
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        batch_size = input_ids.shape[0]
        if position_ids is None and past_key_values is None:
            position_ids = torch.arange(0, input_shape[-1], dtype=torch.long, device=input_ids.device)
            position_ids = position_ids.unsqueeze(0)
        elif position_ids is None:
            past_length = past_key_values[0][0].size(-2)
            position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long,
                                        device=input_ids.device).unsqueeze(0)
        inputs_embeds = self.wte(input_ids)
        attention_mask = attention_mask.view(batch_size, -1)
        attention_mask = _extended_attention_mask(attention_mask, inputs_embeds.dtype)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        hidden_states = self.drop(hidden_states)
        output_shape = (-1,) + input_shape[1:] + (hidden_states.size(-1),)
        presents = []
        for i, block in enumerate(self.h):
            if past_key_values is None:
                hidden_states = block(hidden_states, attention_mask)
            else:
                hidden_states, present = block(hidden_states, attention_mask, past_key_values[i])
                presents.append(present)
        hidden_states = self.ln_f(hidden_states).view(output_shape)
        return (hidden_states,) if past_key_values is None else (hidden_states, presents)


class GPT2LMHeadModel(nn.Module):
    """GPT-2 with its LM head tied to the token embedding (lm_head.weight is transformer.wte.weight,
    as tie_weights() makes it): the export has one [vocab, n_embd] initializer read by the
    embedding's Gather and, through a Transpose, by the LM head's MatMul."""

    def __init__(self, c):
        super().__init__()
        self.transformer = GPT2Model(c)
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, input_ids, attention_mask, position_ids=None, *past_key_values):
        """optimum's layouts, as LlamaForCausalLM.forward."""
        past = _flat_past(past_key_values)
        if past is None:
            return (self.lm_head(self.transformer(input_ids, attention_mask, position_ids)[0]),)
        hidden_states, presents = self.transformer(input_ids, attention_mask, position_ids, past)
        return _flat_presents(self.lm_head(hidden_states), presents)


# ----------------------------------------------------------------------------- Llama
class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        # Phi rotates the first partial_rotary_factor of each head; Gemma sets head_dim explicitly
        head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        dim = int(head_dim * c.get("partial_rotary_factor", 1.0))
        inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.attention_scaling = 1.0

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep: int):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def _cache_update(past_key_value, key_states, value_states):
    """DynamicCache.update: the new keys/values appended to the past along the sequence axis;
    the result is both what attention reads and the layer's `present`."""
    past_key, past_value = past_key_value
    return torch.cat([past_key, key_states], dim=-2), torch.cat([past_value, value_states], dim=-2)


def eager_attention_forward(query, key, value, attention_mask, scaling, num_key_value_groups, dropout=0.0,
                            training=False):
    """transformers' eager_attention_forward (Llama, Phi, Gemma): GQA/MQA by repeat_kv, the 4-D
    additive mask cut to the key length, softmax in float32."""
    key_states = repeat_kv(key, num_key_value_groups)
    value_states = repeat_kv(value, num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
    attn_weights = attn_weights + causal_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=training)
    attn_output = torch.matmul(attn_weights, value_states)
    return attn_output.transpose(1, 2).contiguous()


class LlamaAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = c["hidden_size"] // c["num_attention_heads"]
        self.num_key_value_groups = c["num_attention_heads"] // c["num_key_value_heads"]
        self.scaling = self.head_dim ** -0.5
        self.attention_dropout = 0.0
        h = c["hidden_size"]
        self.q_proj = nn.Linear(h, c["num_attention_heads"] * self.head_dim, bias=False)
        self.k_proj = nn.Linear(h, c["num_key_value_heads"] * self.head_dim, bias=False)
        self.v_proj = nn.Linear(h, c["num_key_value_heads"] * self.head_dim, bias=False)
        self.o_proj = nn.Linear(c["num_attention_heads"] * self.head_dim, h, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_value=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        present = None
        if past_key_value is not None:
            key_states, value_states = _cache_update(past_key_value, key_states, value_states)
            present = (key_states, value_states)
        attn_output = eager_attention_forward(query_states, key_states, value_states, attention_mask, self.scaling,
                                              self.num_key_value_groups, self.attention_dropout, self.training)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.o_proj(attn_output)
        return attn_output if present is None else (attn_output, present)


class LlamaMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], c["hidden_size"], bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.hidden_size = c["hidden_size"]
        self.self_attn = LlamaAttention(c, layer_idx)
        self.mlp = LlamaMLP(c)
        self.input_layernorm = LlamaRMSNorm(c["hidden_size"], eps=c["rms_norm_eps"])
        self.post_attention_layernorm = LlamaRMSNorm(c["hidden_size"], eps=c["rms_norm_eps"])

    def forward(self, hidden_states, attention_mask, position_embeddings, past_key_value=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings, attention_mask, past_key_value)
        present = None
        if past_key_value is not None:
            hidden_states, present = hidden_states
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states if present is None else (hidden_states, present)


def update_causal_mask(attention_mask, input_tensor, cache_position):
    """The 4-D additive mask of LlamaModel._update_causal_mask (also Phi's and Gemma's):
    [batch, 1, sequence, total_sequence], min where a key lies after the query's cache position
    (causal over past + sequence) or is padding in the 2-D attention_mask [batch, total_sequence]."""
    dtype = input_tensor.dtype
    min_dtype = torch.finfo(dtype).min
    sequence_length = input_tensor.shape[1]
    target_length = attention_mask.shape[-1]
    causal_mask = torch.full((sequence_length, target_length), fill_value=min_dtype, dtype=dtype)
    causal_mask = torch.triu(causal_mask, diagonal=1)
    causal_mask *= torch.arange(target_length) > cache_position.reshape(-1, 1)
    causal_mask = causal_mask[None, None, :, :].expand(input_tensor.shape[0], 1, -1, -1)
    padding_mask = causal_mask + attention_mask[:, None, None, :]
    padding_mask = padding_mask == 0
    return causal_mask.masked_fill(padding_mask, min_dtype)


def _make_causal_mask(input_ids_shape, dtype, past_key_values_length):
    """AttentionMaskConverter._make_causal_mask (transformers 4.36/4.37): [sequence, sequence]
    triangle from arange comparisons, zeros for the past columns in front."""
    bsz, tgt_len = input_ids_shape
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min)
    mask_cond = torch.arange(mask.size(-1))
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    if past_key_values_length is not None:  # `> 0` in transformers: true when traced with a past
        mask = torch.cat([torch.zeros(tgt_len, past_key_values_length, dtype=dtype), mask], dim=-1)
        return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len + past_key_values_length)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)


def prepare_4d_causal_attention_mask(attention_mask, inputs_embeds, past_key_values_length):
    """_prepare_4d_causal_attention_mask -> AttentionMaskConverter.to_4d (transformers 4.36/4.37,
    what optimum exported Llama and Phi with): the causal [sequence, past + sequence] mask with the
    2-D padding mask [batch, total_sequence] expanded (_expand_mask) and merged by masked_fill."""
    dtype = inputs_embeds.dtype
    bsz, tgt_len = inputs_embeds.shape[0], inputs_embeds.shape[1]
    causal_4d_mask = _make_causal_mask((bsz, tgt_len), dtype, past_key_values_length)
    src_len = attention_mask.shape[-1]
    expanded_mask = attention_mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
    inverted_mask = 1.0 - expanded_mask
    expanded_attn_mask = inverted_mask.masked_fill(inverted_mask.to(torch.bool), torch.finfo(dtype).min)
    return causal_4d_mask.masked_fill(expanded_attn_mask.bool(), torch.finfo(dtype).min)


def _decoder_prologue(inputs_embeds, attention_mask, position_ids, past_key_values, mask_style="update"):
    """What LlamaModel.forward computes before its layers: cache_position counts on from the past's
    length (past_key_values[0][0].shape[-2], dynamic in the export), position_ids default to it.
    mask_style "update": LlamaModel._update_causal_mask (transformers >= 4.38); "prepare_4d":
    _prepare_4d_causal_attention_mask (4.36/4.37)."""
    past_seen_tokens = None if past_key_values is None else past_key_values[0][0].shape[-2]
    if past_key_values is None:
        cache_position = torch.arange(0, inputs_embeds.shape[1], device=inputs_embeds.device)
    else:
        cache_position = torch.arange(past_seen_tokens, past_seen_tokens + inputs_embeds.shape[1],
                                      device=inputs_embeds.device)
    if position_ids is None:
        position_ids = cache_position.unsqueeze(0)
    if mask_style == "prepare_4d":
        causal_mask = prepare_4d_causal_attention_mask(attention_mask, inputs_embeds, past_seen_tokens)
    else:
        causal_mask = update_causal_mask(attention_mask, inputs_embeds, cache_position)
    return inputs_embeds, causal_mask, position_ids


def _run_layers(layers, final_norm, hidden_states, causal_mask, position_embeddings, past_key_values):
    """The decoder layers and the final norm: hidden_states without a cache, (hidden_states,
    presents) with one. position_embeddings: (cos, sin) for Llama/Gemma, position_ids for Phi
    (per-layer tables)."""
    presents = []
    for i, decoder_layer in enumerate(layers):
        if past_key_values is None:
            hidden_states = decoder_layer(hidden_states, causal_mask, position_embeddings)
        else:
            hidden_states, present = decoder_layer(hidden_states, causal_mask, position_embeddings,
                                                   past_key_values[i])
            presents.append(present)
    hidden_states = final_norm(hidden_states)
    return hidden_states if past_key_values is None else (hidden_states, presents)


def _flat_past(past_flat):
    """optimum's flat inputs past_key_values.N.key, past_key_values.N.value -> ((key, value), ...)."""
    return None if not past_flat else tuple(zip(past_flat[0::2], past_flat[1::2]))


def _flat_presents(logits, presents):
    return (logits,) + tuple(t for kv in presents for t in kv)


class LlamaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.padding_idx = None
        self.vocab_size = c["vocab_size"]
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([LlamaDecoderLayer(c, i) for i in range(c["num_hidden_layers"])])
        self.norm = LlamaRMSNorm(c["hidden_size"], eps=c["rms_norm_eps"])
        self.rotary_emb = LlamaRotaryEmbedding(c)
        self.mask_style = c.get("mask", "update")

    def forward(self, input_ids, attention_mask, position_ids=None, past_key_values=None):
        """Without past_key_values: the no-cache forward (positions 0..sequence-1). With them (one
        (key, value) pair per layer, [batch, kv_heads, past_sequence, head_dim]): returns
        (hidden_states, presents), the presents being the past with this step's keys/values appended."""
        inputs_embeds = self.embed_tokens(input_ids)
        hidden_states, causal_mask, position_ids = _decoder_prologue(inputs_embeds, attention_mask, position_ids,
                                                                     past_key_values, self.mask_style)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        return _run_layers(self.layers, self.norm, hidden_states, causal_mask, position_embeddings,
                           past_key_values)


class LlamaForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = LlamaModel(c)
        self.vocab_size = c["vocab_size"]
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        for m in self.modules():  # LlamaPreTrainedModel._init_weights
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.data.normal_(0.0, 0.02)

    def forward(self, input_ids, attention_mask, position_ids=None, *past_key_values):
        """optimum's decoder layouts: (input_ids, attention_mask) -> logits without a cache;
        (input_ids, attention_mask, position_ids, past_key_values.0.key, past_key_values.0.value, ...)
        -> (logits, present.0.key, present.0.value, ...) with one."""
        past = _flat_past(past_key_values)
        if past is None:
            return (self.lm_head(self.model(input_ids, attention_mask, position_ids)),)
        hidden_states, presents = self.model(input_ids, attention_mask, position_ids, past)
        return _flat_presents(self.lm_head(hidden_states), presents)


# ----------------------------------------------------------------------------- Phi (Phi-1.5 / Phi-2)
# transformers 4.37's modeling_phi (the first native Phi, the one optimum exported Phi-1.5 with):
# rotary tables cached per attention layer and indexed by position_ids, q/k upcast to float32 and
# scores divided by sqrt(head_dim), the 4.36/4.37 _prepare_4d_causal_attention_mask.
class PhiRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000):
        super().__init__()
        self.dim = dim
        self.max_position_embeddings = max_position_embeddings
        self.base = base
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2).float() / self.dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.max_seq_len_cached = max_position_embeddings
        t = torch.arange(self.max_seq_len_cached, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, x, seq_len):
        return self.cos_cached[:seq_len].to(dtype=x.dtype), self.sin_cached[:seq_len].to(dtype=x.dtype)


def apply_rotary_pos_emb_indexed(q, k, cos, sin, position_ids, unsqueeze_dim=1):
    """4.37's apply_rotary_pos_emb: the cached tables gathered by position_ids."""
    cos = cos[position_ids].unsqueeze(unsqueeze_dim)
    sin = sin[position_ids].unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


class PhiAttention(nn.Module):
    """Biased q/k/v projections, rotary on the first rotary_ndims (partial_rotary_factor) of each
    head only, output projection named `dense`."""

    def __init__(self, c, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.hidden_size = c["hidden_size"]
        self.num_heads = c["num_attention_heads"]
        self.head_dim = self.hidden_size // self.num_heads
        self.num_key_value_heads = c["num_key_value_heads"]
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
        self.dense = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=True)
        self.attention_dropout = nn.Dropout(0.0)
        self.rotary_emb = PhiRotaryEmbedding(int(c["partial_rotary_factor"] * self.head_dim),
                                             max_position_embeddings=c["max_position_embeddings"],
                                             base=c["rope_theta"])

    def forward(self, hidden_states, attention_mask, position_ids, past_key_value=None):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        kv_seq_len = key_states.shape[-2]
        if past_key_value is not None:
            kv_seq_len += past_key_value[0].shape[-2]
        cos, sin = self.rotary_emb(value_states, seq_len=kv_seq_len)
        query_rot, query_pass = query_states[..., : self.rotary_emb.dim], query_states[..., self.rotary_emb.dim:]
        key_rot, key_pass = key_states[..., : self.rotary_emb.dim], key_states[..., self.rotary_emb.dim:]
        query_rot, key_rot = apply_rotary_pos_emb_indexed(query_rot, key_rot, cos, sin, position_ids)
        query_states = torch.cat((query_rot, query_pass), dim=-1)
        key_states = torch.cat((key_rot, key_pass), dim=-1)
        present = None
        if past_key_value is not None:
            key_states, value_states = _cache_update(past_key_value, key_states, value_states)
            present = (key_states, value_states)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        # Queries and keys upcast to fp32 to prevent overflow
        attn_weights = torch.matmul(query_states.to(torch.float32),
                                    key_states.to(torch.float32).transpose(2, 3)) / math.sqrt(self.head_dim)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(value_states.dtype)
        attn_weights = self.attention_dropout(attn_weights)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, self.hidden_size)
        attn_output = self.dense(attn_output)
        return attn_output if present is None else (attn_output, present)


class PhiMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.activation_fn = NewGELUActivation()  # ACT2FN["gelu_new"]
        self.fc1 = nn.Linear(c["hidden_size"], c["intermediate_size"])
        self.fc2 = nn.Linear(c["intermediate_size"], c["hidden_size"])

    def forward(self, hidden_states):
        return self.fc2(self.activation_fn(self.fc1(hidden_states)))


class PhiDecoderLayer(nn.Module):
    """One LayerNorm feeding attention and MLP in parallel; both added to the residual."""

    def __init__(self, c, layer_idx):
        super().__init__()
        self.self_attn = PhiAttention(c, layer_idx)
        self.mlp = PhiMLP(c)
        self.input_layernorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.resid_dropout = nn.Dropout(0.0)

    def forward(self, hidden_states, attention_mask, position_ids, past_key_value=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        attn_outputs = self.self_attn(hidden_states, attention_mask, position_ids, past_key_value)
        present = None
        if past_key_value is not None:
            attn_outputs, present = attn_outputs
        attn_outputs = self.resid_dropout(attn_outputs)
        feed_forward_hidden_states = self.resid_dropout(self.mlp(hidden_states))
        hidden_states = attn_outputs + feed_forward_hidden_states + residual
        return hidden_states if present is None else (hidden_states, present)


class PhiModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.embed_dropout = nn.Dropout(0.0)
        self.layers = nn.ModuleList([PhiDecoderLayer(c, i) for i in range(c["num_hidden_layers"])])
        self.final_layernorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

    def forward(self, input_ids, attention_mask, position_ids=None, past_key_values=None):
        inputs_embeds = self.embed_tokens(input_ids)
        hidden_states, causal_mask, position_ids = _decoder_prologue(inputs_embeds, attention_mask, position_ids,
                                                                     past_key_values, "prepare_4d")
        hidden_states = self.embed_dropout(hidden_states)
        # the layers' rotary tables are indexed by position_ids (no shared rotary_emb in 4.37)
        return _run_layers(self.layers, self.final_layernorm, hidden_states, causal_mask, position_ids,
                           past_key_values)


class PhiForCausalLM(nn.Module):
    """Phi-1.5's LM head is untied and has a bias."""

    def __init__(self, c):
        super().__init__()
        self.model = PhiModel(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=True)
        _init_weights(self, 0.02)

    forward = LlamaForCausalLM.forward


# ----------------------------------------------------------------------------- Gemma
class GemmaRMSNorm(nn.Module):
    """Scale (1 + weight), weight initialised to zeros, all in float32 and cast back after the
    scale (Llama casts before it)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class PytorchGELUTanh(nn.Module):
    def forward(self, x):
        return nn.functional.gelu(x, approximate="tanh")


class GemmaMLP(LlamaMLP):
    """GeGLU: down(gelu_tanh(gate(x)) * up(x)) (ACT2FN["gelu_pytorch_tanh"])."""

    def __init__(self, c):
        super().__init__(c)
        self.act_fn = PytorchGELUTanh()


class GemmaAttention(LlamaAttention):
    """LlamaAttention with head_dim from the config (256 for Gemma-2B: 8 x 256 = hidden 2048) and
    one key/value head (MQA) for 2B."""

    def __init__(self, c, layer_idx):
        nn.Module.__init__(self)
        self.layer_idx = layer_idx
        self.head_dim = c["head_dim"]
        self.num_key_value_groups = c["num_attention_heads"] // c["num_key_value_heads"]
        self.scaling = self.head_dim ** -0.5
        self.attention_dropout = 0.0
        h = c["hidden_size"]
        self.q_proj = nn.Linear(h, c["num_attention_heads"] * self.head_dim, bias=False)
        self.k_proj = nn.Linear(h, c["num_key_value_heads"] * self.head_dim, bias=False)
        self.v_proj = nn.Linear(h, c["num_key_value_heads"] * self.head_dim, bias=False)
        self.o_proj = nn.Linear(c["num_attention_heads"] * self.head_dim, h, bias=False)


class GemmaDecoderLayer(LlamaDecoderLayer):
    def __init__(self, c, layer_idx):
        nn.Module.__init__(self)
        self.hidden_size = c["hidden_size"]
        self.self_attn = GemmaAttention(c, layer_idx)
        self.mlp = GemmaMLP(c)
        self.input_layernorm = GemmaRMSNorm(c["hidden_size"], eps=c["rms_norm_eps"])
        self.post_attention_layernorm = GemmaRMSNorm(c["hidden_size"], eps=c["rms_norm_eps"])


class GemmaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.padding_idx = c.get("pad_token_id", 0)
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"], self.padding_idx)
        self.layers = nn.ModuleList([GemmaDecoderLayer(c, i) for i in range(c["num_hidden_layers"])])
        self.norm = GemmaRMSNorm(c["hidden_size"], eps=c["rms_norm_eps"])
        self.rotary_emb = LlamaRotaryEmbedding(c)
        self.hidden_size = c["hidden_size"]

    def forward(self, input_ids, attention_mask, position_ids=None, past_key_values=None):
        inputs_embeds = self.embed_tokens(input_ids)
        hidden_states, causal_mask, position_ids = _decoder_prologue(inputs_embeds, attention_mask, position_ids,
                                                                     past_key_values)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        # the embeddings scaled by sqrt(hidden_size), rounded to the activations' dtype
        normalizer = torch.tensor(self.hidden_size ** 0.5, dtype=hidden_states.dtype)
        hidden_states = hidden_states * normalizer
        return _run_layers(self.layers, self.norm, hidden_states, causal_mask, position_embeddings,
                           past_key_values)


class GemmaForCausalLM(nn.Module):
    """The LM head is tied to embed_tokens (tie_word_embeddings=True)."""

    def __init__(self, c):
        super().__init__()
        self.model = GemmaModel(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        for m in self.modules():  # GemmaPreTrainedModel._init_weights
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.data.normal_(0.0, 0.02)
                if isinstance(m, nn.Embedding) and m.padding_idx is not None:
                    m.weight.data[m.padding_idx].zero_()
        self.lm_head.weight = self.model.embed_tokens.weight

    forward = LlamaForCausalLM.forward


# ----------------------------------------------------------------------------- Whisper encoder
def sinusoids(length, channels, max_timescale=10000):
    log_timescale_increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-log_timescale_increment * torch.arange(channels // 2))
    scaled_time = torch.arange(length).view(-1, 1) * inv_timescales.view(1, -1)
    return torch.cat([scaled_time.sin(), scaled_time.cos()], dim=1)


class WhisperAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, k_bias=False):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.dropout = 0.0
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=k_bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=True)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
        key_states = key_states.reshape(*proj_shape)
        value_states = value_states.reshape(*proj_shape)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_probs = nn.functional.dropout(attn_weights, p=self.dropout, training=self.training)
        attn_output = torch.bmm(attn_probs, value_states)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim)
        attn_output = attn_output.transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, self.embed_dim)
        return self.out_proj(attn_output)


class WhisperEncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_dim = c["d_model"]
        self.self_attn = WhisperAttention(self.embed_dim, c["encoder_attention_heads"])
        self.self_attn_layer_norm = nn.LayerNorm(self.embed_dim)
        self.dropout = 0.0
        self.activation_fn = GELUActivation()
        self.activation_dropout = 0.0
        self.fc1 = nn.Linear(self.embed_dim, c["encoder_ffn_dim"])
        self.fc2 = nn.Linear(c["encoder_ffn_dim"], self.embed_dim)
        self.final_layer_norm = nn.LayerNorm(self.embed_dim)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states = self.self_attn(hidden_states)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.activation_fn(self.fc1(hidden_states))
        hidden_states = nn.functional.dropout(hidden_states, p=self.activation_dropout, training=self.training)
        hidden_states = self.fc2(hidden_states)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        return residual + hidden_states


class WhisperEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        embed_dim = c["d_model"]
        self.num_mel_bins = c["num_mel_bins"]
        self.max_source_positions = c["max_source_positions"]
        self.conv1 = nn.Conv1d(self.num_mel_bins, embed_dim, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(embed_dim, embed_dim, kernel_size=3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(self.max_source_positions, embed_dim)
        self.embed_positions.requires_grad_(False)
        self.layers = nn.ModuleList([WhisperEncoderLayer(c) for _ in range(c["encoder_layers"])])
        self.layer_norm = nn.LayerNorm(embed_dim)
        _init_weights(self, 0.02)
        for conv in (self.conv1, self.conv2):
            conv.weight.data.normal_(0.0, 0.02)
            conv.bias.data.zero_()
        with torch.no_grad():
            self.embed_positions.weight.copy_(sinusoids(self.max_source_positions, embed_dim))

    def forward(self, input_features):
        inputs_embeds = nn.functional.gelu(self.conv1(input_features))
        inputs_embeds = nn.functional.gelu(self.conv2(inputs_embeds))
        inputs_embeds = inputs_embeds.permute(0, 2, 1)
        embed_pos = self.embed_positions.weight
        hidden_states = inputs_embeds + embed_pos
        hidden_states = nn.functional.dropout(hidden_states, p=0.0, training=self.training)
        for encoder_layer in self.layers:
            hidden_states = encoder_layer(hidden_states)
        return (self.layer_norm(hidden_states),)


# ----------------------------------------------------------------------------- DeiT
class DeiTPatchEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.image_size, self.patch_size = c["image_size"], c["patch_size"]
        self.num_channels = c["num_channels"]
        self.num_patches = (c["image_size"] // c["patch_size"]) ** 2
        self.projection = nn.Conv2d(c["num_channels"], c["hidden_size"], kernel_size=c["patch_size"],
                                    stride=c["patch_size"])

    def forward(self, pixel_values):
        return self.projection(pixel_values).flatten(2).transpose(1, 2)


class DeiTEmbeddings(nn.Module):
    """CLS token, distillation token, patch embeddings and position embeddings (num_patches + 2)."""

    def __init__(self, c):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c["hidden_size"]))
        self.distillation_token = nn.Parameter(torch.zeros(1, 1, c["hidden_size"]))
        self.patch_embeddings = DeiTPatchEmbeddings(c)
        num_patches = self.patch_embeddings.num_patches
        self.position_embeddings = nn.Parameter(torch.zeros(1, num_patches + 2, c["hidden_size"]))
        self.dropout = nn.Dropout(0.0)

    def forward(self, pixel_values):
        embeddings = self.patch_embeddings(pixel_values)
        batch_size, seq_length, _ = embeddings.size()
        cls_tokens = self.cls_token.expand(batch_size, -1, -1)
        distillation_tokens = self.distillation_token.expand(batch_size, -1, -1)
        embeddings = torch.cat((cls_tokens, distillation_tokens, embeddings), dim=1)
        embeddings = embeddings + self.position_embeddings
        return self.dropout(embeddings)


class DeiTSelfAttention(BertSelfAttention):
    """ViT's self-attention: BERT's without a mask."""

    def forward(self, hidden_states):
        return super().forward(hidden_states, None)


class DeiTSelfOutput(nn.Module):
    """dense + dropout; the residual is added in DeiTLayer (pre-norm layers)."""

    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])
        self.dropout = nn.Dropout(0.0)

    def forward(self, hidden_states, input_tensor):
        return self.dropout(self.dense(hidden_states))


class DeiTAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = DeiTSelfAttention(c)
        self.output = DeiTSelfOutput(c)

    def forward(self, hidden_states):
        self_outputs = self.attention(hidden_states)
        return self.output(self_outputs, hidden_states)


class DeiTIntermediate(BertIntermediate):
    pass


class DeiTOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["intermediate_size"], c["hidden_size"])
        self.dropout = nn.Dropout(0.0)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dropout(self.dense(hidden_states))
        return hidden_states + input_tensor


class DeiTLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = DeiTAttention(c)
        self.intermediate = DeiTIntermediate(c)
        self.output = DeiTOutput(c)
        self.layernorm_before = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.layernorm_after = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

    def forward(self, hidden_states):
        attention_output = self.attention(self.layernorm_before(hidden_states))
        hidden_states = attention_output + hidden_states  # first residual connection
        layer_output = self.layernorm_after(hidden_states)
        layer_output = self.intermediate(layer_output)
        return self.output(layer_output, hidden_states)  # second residual connection


class DeiTEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([DeiTLayer(c) for _ in range(c["num_hidden_layers"])])

    def forward(self, hidden_states):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states)
        return hidden_states


class DeiTModel(nn.Module):
    """DeiTModel(add_pooling_layer=False), as DeiTForImageClassificationWithTeacher builds it."""

    def __init__(self, c):
        super().__init__()
        self.embeddings = DeiTEmbeddings(c)
        self.encoder = DeiTEncoder(c)
        self.layernorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

    def forward(self, pixel_values):
        embedding_output = self.embeddings(pixel_values)
        sequence_output = self.encoder(embedding_output)
        return self.layernorm(sequence_output)


class DeiTForImageClassificationWithTeacher(nn.Module):
    """Two heads, one on the CLS token and one on the distillation token; inference averages
    their logits."""

    def __init__(self, c):
        super().__init__()
        self.deit = DeiTModel(c)
        self.cls_classifier = nn.Linear(c["hidden_size"], c["num_labels"])
        self.distillation_classifier = nn.Linear(c["hidden_size"], c["num_labels"])
        _init_weights(self, 0.02)
        with torch.no_grad():  # DeiTPreTrainedModel._init_weights: trunc_normal for Linear/Conv2d
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Conv2d)):
                    nn.init.trunc_normal_(m.weight, std=0.02)
            for p in (self.deit.embeddings.cls_token, self.deit.embeddings.distillation_token,
                      self.deit.embeddings.position_embeddings):
                nn.init.trunc_normal_(p, std=0.02)

    def forward(self, pixel_values):
        sequence_output = self.deit(pixel_values)
        cls_logits = self.cls_classifier(sequence_output[:, 0, :])
        distillation_logits = self.distillation_classifier(sequence_output[:, 1, :])
        return ((cls_logits + distillation_logits) / 2,)


# ----------------------------------------------------------------------------- MobileViT
def make_divisible(value, divisor=8, min_value=None):
    """modeling_mobilevit.make_divisible (channels rounded to a multiple of 8, at most 10% down)."""
    if min_value is None:
        min_value = divisor
    new_value = max(min_value, int(value + divisor / 2) // divisor * divisor)
    if new_value < 0.9 * value:
        new_value += divisor
    return int(new_value)


class MobileViTConvLayer(nn.Module):
    """Conv2d (no bias) + BatchNorm2d + SiLU; normalization and activation optional."""

    def __init__(self, c, in_channels, out_channels, kernel_size, stride=1, groups=1, bias=False, dilation=1,
                 use_normalization=True, use_activation=True):
        super().__init__()
        padding = int((kernel_size - 1) / 2) * dilation
        self.convolution = nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=stride,
                                     padding=padding, dilation=dilation, groups=groups, bias=bias,
                                     padding_mode="zeros")
        self.normalization = (nn.BatchNorm2d(out_channels, eps=1e-5, momentum=0.1, affine=True,
                                             track_running_stats=True) if use_normalization else None)
        self.activation = nn.SiLU() if use_activation else None

    def forward(self, features):
        features = self.convolution(features)
        if self.normalization is not None:
            features = self.normalization(features)
        if self.activation is not None:
            features = self.activation(features)
        return features


class MobileViTInvertedResidual(nn.Module):
    """MobileNetV2's inverted residual: 1x1 expand, 3x3 depthwise, 1x1 reduce (no activation)."""

    def __init__(self, c, in_channels, out_channels, stride, dilation=1):
        super().__init__()
        expanded_channels = make_divisible(int(round(in_channels * c["expand_ratio"])), 8)
        self.use_residual = (stride == 1) and (in_channels == out_channels)
        self.expand_1x1 = MobileViTConvLayer(c, in_channels, expanded_channels, kernel_size=1)
        self.conv_3x3 = MobileViTConvLayer(c, expanded_channels, expanded_channels, kernel_size=3, stride=stride,
                                           groups=expanded_channels, dilation=dilation)
        self.reduce_1x1 = MobileViTConvLayer(c, expanded_channels, out_channels, kernel_size=1,
                                             use_activation=False)

    def forward(self, features):
        residual = features
        features = self.expand_1x1(features)
        features = self.conv_3x3(features)
        features = self.reduce_1x1(features)
        return residual + features if self.use_residual else features


class MobileViTMobileNetLayer(nn.Module):
    def __init__(self, c, in_channels, out_channels, stride=1, num_stages=1):
        super().__init__()
        self.layer = nn.ModuleList()
        for i in range(num_stages):
            self.layer.append(MobileViTInvertedResidual(c, in_channels, out_channels,
                                                        stride=stride if i == 0 else 1))
            in_channels = out_channels

    def forward(self, features):
        for layer_module in self.layer:
            features = layer_module(features)
        return features


class MobileViTSelfAttention(BertSelfAttention):
    def __init__(self, c, hidden_size):
        super().__init__(dict(c, hidden_size=hidden_size))

    def forward(self, hidden_states):
        return super().forward(hidden_states, None)


class MobileViTSelfOutput(nn.Module):
    def __init__(self, c, hidden_size):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(0.0)

    def forward(self, hidden_states):
        return self.dropout(self.dense(hidden_states))


class MobileViTAttention(nn.Module):
    def __init__(self, c, hidden_size):
        super().__init__()
        self.attention = MobileViTSelfAttention(c, hidden_size)
        self.output = MobileViTSelfOutput(c, hidden_size)

    def forward(self, hidden_states):
        return self.output(self.attention(hidden_states))


class MobileViTIntermediate(nn.Module):
    def __init__(self, c, hidden_size, intermediate_size):
        super().__init__()
        self.dense = nn.Linear(hidden_size, intermediate_size)
        self.intermediate_act_fn = nn.SiLU()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class MobileViTOutput(nn.Module):
    def __init__(self, c, hidden_size, intermediate_size):
        super().__init__()
        self.dense = nn.Linear(intermediate_size, hidden_size)
        self.dropout = nn.Dropout(0.0)

    def forward(self, hidden_states, input_tensor):
        return self.dropout(self.dense(hidden_states)) + input_tensor


class MobileViTTransformerLayer(nn.Module):
    def __init__(self, c, hidden_size, intermediate_size):
        super().__init__()
        self.attention = MobileViTAttention(c, hidden_size)
        self.intermediate = MobileViTIntermediate(c, hidden_size, intermediate_size)
        self.output = MobileViTOutput(c, hidden_size, intermediate_size)
        self.layernorm_before = nn.LayerNorm(hidden_size, eps=c["layer_norm_eps"])
        self.layernorm_after = nn.LayerNorm(hidden_size, eps=c["layer_norm_eps"])

    def forward(self, hidden_states):
        attention_output = self.attention(self.layernorm_before(hidden_states))
        hidden_states = attention_output + hidden_states
        layer_output = self.layernorm_after(hidden_states)
        layer_output = self.intermediate(layer_output)
        return self.output(layer_output, hidden_states)


class MobileViTTransformer(nn.Module):
    def __init__(self, c, hidden_size, num_stages):
        super().__init__()
        self.layer = nn.ModuleList([MobileViTTransformerLayer(c, hidden_size, int(hidden_size * c["mlp_ratio"]))
                                    for _ in range(num_stages)])

    def forward(self, hidden_states):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states)
        return hidden_states


class MobileViTLayer(nn.Module):
    """MobileViT block: local kxk + 1x1 convs, unfold into patch_area sequences of patches, a
    transformer over each, fold back, 1x1 projection, concatenate with the input, kxk fusion."""

    def __init__(self, c, in_channels, out_channels, stride, hidden_size, num_stages, dilation=1):
        super().__init__()
        self.patch_width = c["patch_size"]
        self.patch_height = c["patch_size"]
        if stride == 2:
            self.downsampling_layer = MobileViTInvertedResidual(
                c, in_channels, out_channels, stride=stride if dilation == 1 else 1,
                dilation=dilation - 1 if dilation > 1 else 1)
            in_channels = out_channels
        else:
            self.downsampling_layer = None
        self.conv_kxk = MobileViTConvLayer(c, in_channels, in_channels, kernel_size=c["conv_kernel_size"])
        self.conv_1x1 = MobileViTConvLayer(c, in_channels, hidden_size, kernel_size=1, use_normalization=False,
                                           use_activation=False)
        self.transformer = MobileViTTransformer(c, hidden_size=hidden_size, num_stages=num_stages)
        self.layernorm = nn.LayerNorm(hidden_size, eps=c["layer_norm_eps"])
        self.conv_projection = MobileViTConvLayer(c, hidden_size, in_channels, kernel_size=1)
        self.fusion = MobileViTConvLayer(c, 2 * in_channels, in_channels, kernel_size=c["conv_kernel_size"])

    def unfolding(self, features):
        patch_width, patch_height = self.patch_width, self.patch_height
        patch_area = int(patch_width * patch_height)
        batch_size, channels, orig_height, orig_width = features.shape
        new_height = int(math.ceil(orig_height / patch_height) * patch_height)
        new_width = int(math.ceil(orig_width / patch_width) * patch_width)
        interpolate = False
        if new_width != orig_width or new_height != orig_height:
            features = nn.functional.interpolate(features, size=(new_height, new_width), mode="bilinear",
                                                 align_corners=False)
            interpolate = True
        num_patch_width = new_width // patch_width
        num_patch_height = new_height // patch_height
        num_patches = num_patch_height * num_patch_width
        # (B, C, H, W) -> (B * C * n_h, p_h, n_w, p_w) -> (B * C * n_h, n_w, p_h, p_w)
        patches = features.reshape(batch_size * channels * num_patch_height, patch_height, num_patch_width,
                                   patch_width)
        patches = patches.transpose(1, 2)
        # -> (B, C, N, P) -> (B, P, N, C) -> (B * P, N, C)
        patches = patches.reshape(batch_size, channels, num_patches, patch_area)
        patches = patches.transpose(1, 3)
        patches = patches.reshape(batch_size * patch_area, num_patches, -1)
        info_dict = {"orig_size": (orig_height, orig_width), "batch_size": batch_size, "channels": channels,
                     "interpolate": interpolate, "num_patches": num_patches,
                     "num_patches_width": num_patch_width, "num_patches_height": num_patch_height}
        return patches, info_dict

    def folding(self, patches, info_dict):
        patch_width, patch_height = self.patch_width, self.patch_height
        patch_area = int(patch_width * patch_height)
        batch_size = info_dict["batch_size"]
        channels = info_dict["channels"]
        num_patches = info_dict["num_patches"]
        num_patch_height = info_dict["num_patches_height"]
        num_patch_width = info_dict["num_patches_width"]
        # (B * P, N, C) -> (B, P, N, C) -> (B, C, N, P)
        features = patches.contiguous().view(batch_size, patch_area, num_patches, -1)
        features = features.transpose(1, 3)
        # -> (B * C * n_h, n_w, p_h, p_w) -> (B * C * n_h, p_h, n_w, p_w) -> (B, C, H, W)
        features = features.reshape(batch_size * channels * num_patch_height, num_patch_width, patch_height,
                                    patch_width)
        features = features.transpose(1, 2)
        features = features.reshape(batch_size, channels, num_patch_height * patch_height,
                                    num_patch_width * patch_width)
        if info_dict["interpolate"]:
            features = nn.functional.interpolate(features, size=info_dict["orig_size"], mode="bilinear",
                                                 align_corners=False)
        return features

    def forward(self, features):
        if self.downsampling_layer:
            features = self.downsampling_layer(features)
        residual = features
        features = self.conv_kxk(features)
        features = self.conv_1x1(features)
        patches, info_dict = self.unfolding(features)
        patches = self.transformer(patches)
        patches = self.layernorm(patches)
        features = self.folding(patches, info_dict)
        features = self.conv_projection(features)
        return self.fusion(torch.cat((residual, features), dim=1))


class MobileViTEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        neck, hidden = c["neck_hidden_sizes"], c["hidden_sizes"]
        stages = c.get("transformer_stages", (2, 4, 3))
        self.layer = nn.ModuleList([
            MobileViTMobileNetLayer(c, neck[0], neck[1], stride=1, num_stages=1),
            MobileViTMobileNetLayer(c, neck[1], neck[2], stride=2, num_stages=3),
            MobileViTLayer(c, neck[2], neck[3], stride=2, hidden_size=hidden[0], num_stages=stages[0]),
            MobileViTLayer(c, neck[3], neck[4], stride=2, hidden_size=hidden[1], num_stages=stages[1]),
            MobileViTLayer(c, neck[4], neck[5], stride=2, hidden_size=hidden[2], num_stages=stages[2]),
        ])

    def forward(self, hidden_states):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states)
        return hidden_states


class MobileViTModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        neck = c["neck_hidden_sizes"]
        self.conv_stem = MobileViTConvLayer(c, c["num_channels"], neck[0], kernel_size=3, stride=2)
        self.encoder = MobileViTEncoder(c)
        self.conv_1x1_exp = MobileViTConvLayer(c, neck[5], neck[6], kernel_size=1)

    def forward(self, pixel_values):
        embedding_output = self.conv_stem(pixel_values)
        last_hidden_state = self.conv_1x1_exp(self.encoder(embedding_output))
        return torch.mean(last_hidden_state, dim=[-2, -1], keepdim=False)  # pooler_output


class MobileViTForImageClassification(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.mobilevit = MobileViTModel(c)
        self.dropout = nn.Dropout(0.1, inplace=True)
        self.classifier = nn.Linear(c["neck_hidden_sizes"][-1], c["num_labels"])
        _init_weights(self, 0.02)
        for m in self.modules():  # MobileViTPreTrainedModel._init_weights: convs too
            if isinstance(m, nn.Conv2d):
                m.weight.data.normal_(0.0, 0.02)

    def forward(self, pixel_values):
        pooled_output = self.mobilevit(pixel_values)
        return (self.classifier(self.dropout(pooled_output)),)


# ----------------------------------------------------------------------------- Wav2Vec2
class Wav2Vec2NoLayerNormConvLayer(nn.Module):
    def __init__(self, c, layer_id=0):
        super().__init__()
        self.in_conv_dim = c["conv_dim"][layer_id - 1] if layer_id > 0 else 1
        self.out_conv_dim = c["conv_dim"][layer_id]
        self.conv = nn.Conv1d(self.in_conv_dim, self.out_conv_dim, kernel_size=c["conv_kernel"][layer_id],
                              stride=c["conv_stride"][layer_id], bias=c["conv_bias"])
        self.activation = GELUActivation()

    def forward(self, hidden_states):
        return self.activation(self.conv(hidden_states))


class Wav2Vec2GroupNormConvLayer(nn.Module):
    """The first feature-encoder layer of feat_extract_norm="group" models: GroupNorm with one
    group per channel."""

    def __init__(self, c, layer_id=0):
        super().__init__()
        self.in_conv_dim = c["conv_dim"][layer_id - 1] if layer_id > 0 else 1
        self.out_conv_dim = c["conv_dim"][layer_id]
        self.conv = nn.Conv1d(self.in_conv_dim, self.out_conv_dim, kernel_size=c["conv_kernel"][layer_id],
                              stride=c["conv_stride"][layer_id], bias=c["conv_bias"])
        self.activation = GELUActivation()
        self.layer_norm = nn.GroupNorm(num_groups=self.out_conv_dim, num_channels=self.out_conv_dim, affine=True)

    def forward(self, hidden_states):
        hidden_states = self.conv(hidden_states)
        hidden_states = self.layer_norm(hidden_states)
        return self.activation(hidden_states)


class Wav2Vec2FeatureEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        n = len(c["conv_dim"])
        self.conv_layers = nn.ModuleList([Wav2Vec2GroupNormConvLayer(c, layer_id=0)] +
                                         [Wav2Vec2NoLayerNormConvLayer(c, layer_id=i + 1) for i in range(n - 1)])

    def forward(self, input_values):
        hidden_states = input_values[:, None]
        for conv_layer in self.conv_layers:
            hidden_states = conv_layer(hidden_states)
        return hidden_states


class Wav2Vec2FeatureProjection(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer_norm = nn.LayerNorm(c["conv_dim"][-1], eps=c["layer_norm_eps"])
        self.projection = nn.Linear(c["conv_dim"][-1], c["hidden_size"])
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states):
        norm_hidden_states = self.layer_norm(hidden_states)
        hidden_states = self.projection(norm_hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states, norm_hidden_states


class Wav2Vec2SamePadLayer(nn.Module):
    def __init__(self, num_conv_pos_embeddings):
        super().__init__()
        self.num_pad_remove = 1 if num_conv_pos_embeddings % 2 == 0 else 0

    def forward(self, hidden_states):
        if self.num_pad_remove > 0:
            hidden_states = hidden_states[:, :, : -self.num_pad_remove]
        return hidden_states


class Wav2Vec2PositionalConvEmbedding(nn.Module):
    """A grouped Conv1d over time (kernel num_conv_pos_embeddings, padding half of it, one
    trailing frame removed for even kernels) + GELU. HF applies weight_norm(dim=2) to the conv;
    the zoo folds it (weight = g * v / ||v||, what remove_weight_norm does), as a deployed
    export would, so the graph holds one plain weight."""

    def __init__(self, c):
        super().__init__()
        k, groups, hidden = c["num_conv_pos_embeddings"], c["num_conv_pos_embedding_groups"], c["hidden_size"]
        self.conv = nn.Conv1d(hidden, hidden, kernel_size=k, padding=k // 2, groups=groups)
        with torch.no_grad():  # Wav2Vec2PreTrainedModel._init_weights
            self.conv.weight.normal_(0.0, 2 * math.sqrt(1 / (k * hidden // groups)))
            self.conv.bias.zero_()
        nn.utils.weight_norm(self.conv, name="weight", dim=2)
        nn.utils.remove_weight_norm(self.conv, name="weight")
        self.padding = Wav2Vec2SamePadLayer(k)
        self.activation = GELUActivation()

    def forward(self, hidden_states):
        hidden_states = hidden_states.transpose(1, 2)
        hidden_states = self.conv(hidden_states)
        hidden_states = self.padding(hidden_states)
        hidden_states = self.activation(hidden_states)
        return hidden_states.transpose(1, 2)


class Wav2Vec2Attention(WhisperAttention):
    """BART attention (k_proj with bias), without masks or caches."""

    def __init__(self, embed_dim, num_heads):
        super().__init__(embed_dim, num_heads, k_bias=True)


class Wav2Vec2FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.intermediate_dropout = nn.Dropout(0.0)
        self.intermediate_dense = nn.Linear(c["hidden_size"], c["intermediate_size"])
        self.intermediate_act_fn = GELUActivation()
        self.output_dense = nn.Linear(c["intermediate_size"], c["hidden_size"])
        self.output_dropout = nn.Dropout(0.1)

    def forward(self, hidden_states):
        hidden_states = self.intermediate_dense(hidden_states)
        hidden_states = self.intermediate_act_fn(hidden_states)
        hidden_states = self.intermediate_dropout(hidden_states)
        hidden_states = self.output_dense(hidden_states)
        return self.output_dropout(hidden_states)


class Wav2Vec2EncoderLayer(nn.Module):
    """Post-norm layer (do_stable_layer_norm=False, the base model's)."""

    def __init__(self, c):
        super().__init__()
        self.attention = Wav2Vec2Attention(c["hidden_size"], c["num_attention_heads"])
        self.dropout = nn.Dropout(0.1)
        self.layer_norm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.feed_forward = Wav2Vec2FeedForward(c)
        self.final_layer_norm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

    def forward(self, hidden_states):
        attn_residual = hidden_states
        hidden_states = self.attention(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = attn_residual + hidden_states
        hidden_states = self.layer_norm(hidden_states)
        hidden_states = hidden_states + self.feed_forward(hidden_states)
        return self.final_layer_norm(hidden_states)


class Wav2Vec2Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.pos_conv_embed = Wav2Vec2PositionalConvEmbedding(c)
        self.layer_norm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(0.1)
        self.layers = nn.ModuleList([Wav2Vec2EncoderLayer(c) for _ in range(c["num_hidden_layers"])])

    def forward(self, hidden_states):
        position_embeddings = self.pos_conv_embed(hidden_states)
        hidden_states = hidden_states + position_embeddings
        hidden_states = self.layer_norm(hidden_states)
        hidden_states = self.dropout(hidden_states)
        for layer in self.layers:  # LayerDrop is training-only
            hidden_states = layer(hidden_states)
        return hidden_states


class Wav2Vec2Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.feature_extractor = Wav2Vec2FeatureEncoder(c)
        self.feature_projection = Wav2Vec2FeatureProjection(c)
        # used only for SpecAugment in training (mask_time_prob > 0 in the base config)
        self.masked_spec_embed = nn.Parameter(torch.empty(c["hidden_size"]).uniform_())
        self.encoder = Wav2Vec2Encoder(c)
        # Wav2Vec2PreTrainedModel._init_weights (the positional conv initialised itself)
        for name, m in self.named_modules():
            if name == "feature_projection.projection":
                k = math.sqrt(1 / m.in_features)
                nn.init.uniform_(m.weight, a=-k, b=k)
                nn.init.uniform_(m.bias, a=-k, b=k)
            elif isinstance(m, nn.Linear):
                m.weight.data.normal_(0.0, 0.02)
                m.bias.data.zero_()
            elif isinstance(m, (nn.LayerNorm, nn.GroupNorm)):
                m.weight.data.fill_(1.0)
                m.bias.data.zero_()
            elif isinstance(m, nn.Conv1d) and not name.startswith("encoder.pos_conv_embed"):
                nn.init.kaiming_normal_(m.weight)
                if m.bias is not None:
                    k = math.sqrt(m.groups / (m.in_channels * m.kernel_size[0]))
                    nn.init.uniform_(m.bias, a=-k, b=k)

    def forward(self, input_values):
        extract_features = self.feature_extractor(input_values)
        extract_features = extract_features.transpose(1, 2)
        hidden_states, extract_features = self.feature_projection(extract_features)
        hidden_states = self.encoder(hidden_states)
        return hidden_states, extract_features

"""The model's tokenizer as LLM.get_tokenizer() returns it: Hugging Face's encode / decode /
apply_chat_template shapes, computed by ditto's tokenizer (exact parity with `tokenizers` and
transformers' chat templates)."""
from __future__ import annotations

import json
import os
from typing import Any, Optional, Union

from ditto import _ditto


# transformers' SPECIAL_TOKENS_ATTRIBUTES but additional_special_tokens, in its order.
_SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class Tokenizer:
    """encode(text, add_special_tokens=True) -> ids; decode(ids, skip_special_tokens=False) -> str;
    apply_chat_template(conversation, ...) -> ids or text. Raises ValueError for a model without
    tokenizer.json (token-id prompts still run)."""

    def __init__(self, engine: "_ditto.Engine") -> None:
        self._engine = engine
        self._vocab: Optional[dict[str, int]] = None
        self._config: Optional[dict] = None

    def _tokenizer_config(self) -> dict:
        """tokenizer_config.json as the engine's tokenizer read it ({} when it has none; for a GGUF
        file, the one built from its tokenizer keys)."""
        if self._config is None:
            self._config = json.loads(self._engine.tokenizer_config_json)
        return self._config

    @property
    def name_or_path(self) -> str:
        """The model directory (or GGUF file) the tokenizer was loaded from."""
        return self._engine.model_dir

    @property
    def chat_template(self) -> Optional[str]:
        """tokenizer_config.json's chat_template (or chat_template.jinja's), None without one."""
        template = self._tokenizer_config().get("chat_template")
        path = os.path.join(self._engine.model_dir, "chat_template.jinja")
        if template is None and os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                template = f.read()
        return template if isinstance(template, str) else None

    # transformers' special-token attributes (SpecialTokensMixin), read from tokenizer_config.json.
    @property
    def pad_token(self) -> Optional[str]:
        return self._config_token("pad_token")

    @property
    def pad_token_id(self) -> Optional[int]:
        return self._token_id(self.pad_token)

    @property
    def unk_token(self) -> Optional[str]:
        return self._config_token("unk_token")

    @property
    def unk_token_id(self) -> Optional[int]:
        return self._token_id(self.unk_token)

    @property
    def sep_token(self) -> Optional[str]:
        return self._config_token("sep_token")

    @property
    def sep_token_id(self) -> Optional[int]:
        return self._token_id(self.sep_token)

    @property
    def cls_token(self) -> Optional[str]:
        return self._config_token("cls_token")

    @property
    def cls_token_id(self) -> Optional[int]:
        return self._token_id(self.cls_token)

    @property
    def mask_token(self) -> Optional[str]:
        return self._config_token("mask_token")

    @property
    def mask_token_id(self) -> Optional[int]:
        return self._token_id(self.mask_token)

    @property
    def additional_special_tokens(self) -> list[str]:
        """tokenizer_config's additional_special_tokens (strings or AddedToken dicts' content)."""
        tokens = self._tokenizer_config().get("additional_special_tokens") or []
        out = [t.get("content") if isinstance(t, dict) else t for t in tokens if isinstance(t, (str, dict))]
        return [t for t in out if isinstance(t, str)]

    @property
    def additional_special_tokens_ids(self) -> list[Optional[int]]:
        return [self._token_id(t) for t in self.additional_special_tokens]

    @property
    def special_tokens_map(self) -> dict[str, Union[str, list[str]]]:
        """transformers' special_tokens_map: each of bos_token, eos_token, unk_token, sep_token,
        pad_token, cls_token, mask_token the model sets, and additional_special_tokens when it has
        any, in that order."""
        out: dict[str, Union[str, list[str]]] = {}
        for name in _SPECIAL_TOKEN_NAMES:
            token = getattr(self, name)
            if token is not None:
                out[name] = token
        if self.additional_special_tokens:
            out["additional_special_tokens"] = self.additional_special_tokens
        return out

    @property
    def all_special_tokens(self) -> list[str]:
        """Every special token of special_tokens_map once, in its order (transformers')."""
        out: list[str] = []
        for value in self.special_tokens_map.values():
            for token in value if isinstance(value, list) else [value]:
                if token not in out:
                    out.append(token)
        return out

    @property
    def all_special_ids(self) -> list[Optional[int]]:
        """The ids of all_special_tokens, in the same order."""
        return [self._token_id(t) for t in self.all_special_tokens]

    def _token_id(self, token: Optional[str]) -> Optional[int]:
        return None if token is None else self._engine.token_to_id(token)

    def get_vocab(self) -> dict[str, int]:
        """{token: id} for every id the tokenizer names (added tokens included)."""
        if self._vocab is None:
            vocab = {}
            for i in range(self._engine.vocab_size):
                token = self._engine.id_to_token(i)
                if token is not None:
                    vocab[token] = i
            self._vocab = vocab
        return dict(self._vocab)

    def tokenize(self, text: str, add_special_tokens: bool = False) -> list[str]:
        """The tokens of `text` as strings (transformers' tokenize: no special tokens added)."""
        return self.convert_ids_to_tokens(self.encode(text, add_special_tokens))

    @property
    def vocab_size(self) -> int:
        return self._engine.vocab_size

    def __len__(self) -> int:
        return self._engine.vocab_size

    @property
    def eos_token_id(self) -> Optional[int]:
        """tokenizer_config's eos_token's id (as transformers), else the first id generation stops at."""
        token = self._config_token("eos_token")
        if token is not None and self._engine.token_to_id(token) is not None:
            return self._engine.token_to_id(token)
        ids = self._engine.eos_token_ids
        return ids[0] if ids else None

    @property
    def eos_token(self) -> Optional[str]:
        """tokenizer_config's eos_token, else the token of eos_token_id."""
        token = self._config_token("eos_token")
        if token is not None:
            return token
        eos = self.eos_token_id
        return None if eos is None else self._engine.id_to_token(eos)

    def _config_token(self, key: str) -> Optional[str]:
        """A special token of tokenizer_config (a string, or an AddedToken dict's content)."""
        token = self._tokenizer_config().get(key)
        return token.get("content") if isinstance(token, dict) else token if isinstance(token, str) else None

    @property
    def bos_token_id(self) -> Optional[int]:
        """The id the tokenizer puts first (None when it adds none: Qwen3), else tokenizer_config's
        bos_token's id."""
        bos = self._engine.bos_token_id
        return bos if bos is not None else self._token_id(self._config_token("bos_token"))

    @property
    def bos_token(self) -> Optional[str]:
        """tokenizer_config's bos_token, else the token of bos_token_id."""
        token = self._config_token("bos_token")
        if token is not None:
            return token
        bos = self._engine.bos_token_id
        return None if bos is None else self._engine.id_to_token(bos)

    def __call__(self, text: Union[str, list[str]], add_special_tokens: bool = True) -> dict:
        """{"input_ids": ids} (a list of them for a list of texts), as a transformers tokenizer."""
        if isinstance(text, list):
            return {"input_ids": [self.encode(t, add_special_tokens) for t in text]}
        return {"input_ids": self.encode(text, add_special_tokens)}

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        return self._engine.encode(text, add_special_tokens)

    def decode(self, token_ids: Union[int, list[int]], skip_special_tokens: bool = False) -> str:
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        return self._engine.decode(list(token_ids), skip_special_tokens)

    def batch_decode(self, sequences: list[list[int]], skip_special_tokens: bool = False) -> list[str]:
        return [self.decode(ids, skip_special_tokens) for ids in sequences]

    def convert_tokens_to_ids(self, tokens: Union[str, list[str]]) -> Union[Optional[int], list[Optional[int]]]:
        if isinstance(tokens, str):
            return self._engine.token_to_id(tokens)
        return [self._engine.token_to_id(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: Union[int, list[int]]) -> Union[Optional[str], list[Optional[str]]]:
        if isinstance(ids, int):
            return self._engine.id_to_token(ids)
        return [self._engine.id_to_token(i) for i in ids]

    def apply_chat_template(self, conversation: list[dict], tools: Optional[list[dict]] = None,
                            add_generation_prompt: bool = False, continue_final_message: bool = False,
                            tokenize: bool = True, **kwargs: Any) -> Union[list[int], str]:
        """The rendered conversation (tokenize=False) or its token ids (tokenize=True, the
        default, as in transformers). Extra keyword arguments reach the template
        (e.g. enable_thinking=False)."""
        prompt = chat_prompt(conversation, tools, kwargs, add_generation_prompt, continue_final_message)
        ids, text = self._engine.render_chat(prompt)
        return ids if tokenize else text


def chat_prompt(messages: Any, tools: Optional[list[dict]], chat_template_kwargs: Optional[dict],
                add_generation_prompt: bool, continue_final_message: bool) -> "_ditto.Prompt":
    """One conversation as the engine's prompt. Raises ValueError naming what is wrong."""
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ValueError("messages must be a list of {'role': ..., 'content': ...} dicts")
    if chat_template_kwargs is not None and not isinstance(chat_template_kwargs, dict):
        raise ValueError("chat_template_kwargs must be a dict")
    p = _ditto.Prompt()
    p.messages_json = _json("messages", messages)
    p.tools_json = _json("tools", tools)
    p.chat_template_kwargs_json = _json("chat_template_kwargs", chat_template_kwargs or {})
    p.add_generation_prompt = add_generation_prompt
    p.continue_final_message = continue_final_message
    return p


def _json(name: str, value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be JSON-serializable: {e}") from None

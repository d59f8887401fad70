#!/usr/bin/python3
"""gen_spm_data.py - make extra SentencePiece reference vectors for the llama
vocab with Google's sentencepiece (Debian: python3-sentencepiece) and
shared/models/llama2.c/tokenizer.model (Meta's Llama 2 tokenizer, the same
vocab as ggml-vocab-llama-spm.gguf).

Writes tests/vocab/data/llama2-spm.inp and .out in llama.cpp's test-vector
format (cases separated by "\\n__ggml_vocab_test__\\n"; one line of " %d"
ids per case), encoded with add_bos=False, as b1892's SPM tokenizer was
built to match. The cases are hand-picked strings plus strings drawn from a
fixed-seed generator over mixed scripts, so the output is reproducible.

Usage: /usr/bin/python3 tests/vocab/gen_spm_data.py [path/to/tokenizer.model]
"""
import os
import random
import sys

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = "\n__ggml_vocab_test__\n"

HAND = [
    "Hello, World!", "hello world", "HELLO", "  leading", "trailing  ", "a\tb\tc", "line1\nline2\r\nline3",
    "x" * 300, " " * 17, "\n" * 5, "The quick brown fox jumps over the lazy dog. " * 6,
    "int main(void) { return printf(\"%d\\n\", 42); }", "def f(x):\n    return x ** 2  # square\n",
    "https://example.com/path?q=1&r=2#frag", "e-mail: someone@example.org", "3.14159 2.71828 1e-9 0x1F",
    "1234567890" * 3, "¡Hola! ¿Qué tal? Ñandú, pingüino, façade, naïve, résumé",
    "Γειά σου Κόσμε", "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "こんにちは世界、カタカナとひらがな", "你好，世界！今天天气很好。", "안녕하세요 세계",
    "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "ქართული ენა",
    "🦙🦙🦙 llamas 🐪", "👩‍👩‍👧‍👦 family", "e\u0301 combining acute", "\u200b zero width \u200d joiner",
    "\U00010348 gothic \U0001D11E music \U0001F600", "\ue000 private use \U000F0000",
    "<s> not special </s> <unk> <0x0A>", "▁ already escaped ▁▁", "\x01\x02\x1f control bytes\x7f",
    "tab\t\t\tspaces   mixed \t \t", "ALLCAPS lowercase MiXeD CamelCase snake_case kebab-case",
    "((([[[{{{<<<>>>}}}]]])))", "!!!???...,,,;;;:::", "'quoted' \"double\" `back`", "I'm you're we've they'll it'd",
]

ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " " * 8 + "\t\n",
    ".,;:!?'\"()-_/\\@#$%^&*+=<>[]{}|~`", "äöüßéèêàçñ", "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
    "αβγδεζηθικλμνξοπρστυφχψω", "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年", "😀😂🥲🤖🚀✅❤️",
    "\u0301\u0308\u0327", "ㄱㄴㄷㄹㅁㅂ가나다라마바",
]


def random_case(rng):
    n = rng.randint(1, 60)
    picks = rng.choices(ALPHABETS, k=rng.randint(1, 4))
    return "".join(rng.choice(rng.choice(picks)) for _ in range(n))


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../shared/models/llama2.c/tokenizer.model")
    sp = spm.SentencePieceProcessor(model_file=model)
    rng = random.Random(1892)
    cases = HAND + [random_case(rng) for _ in range(200)]
    os.makedirs(os.path.join(HERE, "data"), exist_ok=True)
    with open(os.path.join(HERE, "data/llama2-spm.inp"), "w", encoding="utf-8", newline="") as f:
        for c in cases:
            f.write(c + SEP)
    with open(os.path.join(HERE, "data/llama2-spm.out"), "w", encoding="utf-8", newline="") as f:
        for c in cases:
            f.write("".join(" %d" % i for i in sp.encode(c)) + "\n")


if __name__ == "__main__":
    main()

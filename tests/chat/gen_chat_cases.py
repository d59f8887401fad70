#!/usr/bin/env python3
"""gen_chat_cases.py - writes test_chat_cases.h: engine cases for
test_chat_templates.c with the output Python's jinja2 gives them, under
transformers' settings (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, json.dumps tojson, raise_exception,
strftime_now returning "04 Dec 2026"). Each template renders with
messages=[{"role": "user", "content": "Hi"}], bos_token="<s>",
eos_token="</s>", add_generation_prompt=False.

Cases that jinja2 refuses carry the text lamina's error must contain (the
second field); the script checks that jinja2 refuses them too.
Run: python3 tests/chat/gen_chat_cases.py > tests/chat/test_chat_cases.h
(needs jinja2 3.1: apt-get install python3-jinja2)."""
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

OK = [
    # text, whitespace control, comments
    "plain text",
    "a\n  {% if true %}\n  x\n  {% endif %}\n  y",
    "a   {%- if true -%}   b   {%- endif %}   \nc",
    "x{{- ' y' }}\n  {{ 'z' -}}\n  w",
    "{% for i in range(3) %}\n  {{ i }}\n{% endfor %}",
    "{%+ if true %}\n  x{% endif +%}\ny",
    " {% if true %}a{% endif %}",
    "{{ 'a' }}  {% if true %}b{% endif %}",
    "a\n  {# comment #}\nb",
    "a  {# c #}  b",
    "a {#- c -#} b",
    "a\n  {% raw %}\n  x {{ y }} {% if %}\n  {% endraw %}\nb",
    "line1\r\nline2\r\n{% if true %}\r\nx\r\n{% endif %}\r\n",
    "trailing newline dropped\n",
    "{{ 'keeps' }}\n\n",
    "\t{% if true %}tab{% endif %}",
    "a {%- if true %}\n\n  b{% endif %}",
    # literals and printing
    "{{ 1 }} {{ -2 }} {{ 1.0 }} {{ 1.5e3 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 1_000 }} {{ 0x1F }}",
    "{{ [1, 'a', none, true, {'k': \"it's\"}] }} {{ (1, 2) }} {{ (1,) }} {{ () }}",
    "{{ true }} {{ True }} {{ none }} {{ None }} {{ false }}",
    "{{ 'a\\tb\\x41\\u00e9\\n\\d' }}",
    "{{ 'ab' 'cd' }}|{{ \"q'\" }}|{{ ['q\"', \"'\"] }}",
    "{{ 'héllo'[1] }}{{ 'héllo'[-1] }}{{ 'héllo' | length }}{{ 'héllo'[1:3] }}",
    # arithmetic and operators
    "{{ 10 / 4 }} {{ 7 // -2 }} {{ -7 % 3 }} {{ 2 ** -1 }} {{ 2 ** 10 }} {{ 7 % -3 }} {{ 7.5 // 2 }}",
    "{{ 'x' * 3 }}{{ [1] * 2 }}{{ 3 * 'y' }}{{ 'ab' * 0 }}|{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }}",
    "{{ 'a' ~ none ~ undefined_name ~ 1 ~ [2] }}",
    "{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}",
    "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 1 in undefined_name }}",
    "{{ not true }} {{ not 0 }} {{ 1 and 'x' }} {{ 0 or '' or 'y' }} {{ none or 0 }} {{ [] and 1 }}",
    "{{ 'yes' if 1 else 'no' }}{{ 'a' if false }}|{{ 'b' if 0 else 'c' if 1 else 'd' }}",
    "{{ -1 | abs }} {{ -(2) }} {{ +3 }} {{ - 2 ** 2 }}",
    # names, attributes, items
    "{{ messages[0].role }} {{ messages[0]['content'] }} {{ messages | length }} {{ messages[-1].role }}",
    "[{{ undefined_name }}][{{ messages[5] }}][{{ none.x }}][{{ (1).x }}][{{ 'ab'.zz }}][{{ messages[0].nope }}]",
    "{{ {'a': 1}.items() | list }} {{ {'a': 1}.get('a') }} {{ {'a': 1}.get('b', 2) }} {{ {'a': 1}.get('b') }}",
    "{{ {'a': 1, 'b': 2}.keys() | list }} {{ {'a': 1, 'b': 2}.values() | list }} {{ {'items': 5}['items'] }}",
    "{{ [1, 2, 3][::-1] }} {{ [1, 2, 3][1:] }} {{ [1, 2, 3][:-1] }} {{ 'abcdef'[::2] }} {{ [1, 2, 3][5:] }} {{ 'abc'[-10:2] }}",
    "{{ messages.0.role }} {{ [[1, 2]][0][1] }} {{ {'a': {'b': 'c'}}.a.b }}",
    "{{ [1, 2, 3].index(2) }} {{ [1, 1, 2].count(1) }}",
    # statements
    "{% for m in [1, 2, 3] %}{% if loop.first %}F{% endif %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
    "{{ loop.revindex0 }}{{ loop.length }}{% if loop.last %}L{% endif %}|{% endfor %}",
    "{% for x in [] %}a{% else %}empty{% endfor %}{% for x in [1] %}{{ x }}{% else %}no{% endfor %}",
    "{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }},{% endfor %}",
    "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}",
    "{% for k, v in {'a': 1} | items %}{{ k }}{{ v }}{% endfor %}{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}",
    "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in 'héy' %}[{{ x }}]{% endfor %}{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}",
    "{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}",
    "{% set x = 5 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{{ x }}{% endfor %}{{ x }}",
    "{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}",
    "{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }} {{ loop.cycle('a', 'b') }}|{% endfor %}",
    "{% if false %}a{% elif 0 %}b{% elif 'x' %}c{% else %}d{% endif %}{% if none %}e{% else %}f{% endif %}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}",
    "{% set ns = namespace(a=1, b='x') %}{% set ns.a = ns.a + 1 %}{{ ns.a }}{{ ns.b }}{{ ns.c }}|{{ ns }}",
    "{% set ns = namespace() %}{% set ns.n = 0 %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
    "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}",
    "{% set block %}inner {{ 1 + 1 }}{% endset %}[{{ block }}]",
    "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}",
    "{% macro m(x) %}{{ x }}{% endmacro %}[{{ m() }}][{{ m(none) }}]",
    "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}",
    "{{ dict(a=1, b='2') }} {{ dict({'x': 1}, y=2) }} {{ dict([['k', 'v']]) }} {{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }}",
    "{{ strftime_now('%d %b %Y') }}",
    "{{ raise_exception is defined }} {{ strftime_now is defined }} {{ namespace is callable }}",
    # tests
    "{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 1 is number }} {{ 1.0 is float }} {{ 1 is integer }} {{ true is integer }}",
    "{{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is sequence }} {{ x is iterable }} {{ 1 is iterable }}",
    "{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ true is boolean }} {{ none is not none }}",
    "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 2 is eq 2 }} {{ 2 is ne 3 }} {{ 'a' is in 'abc' }}",
    "{{ 1 is lt 2 }} {{ 1 is gt(2) }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aB' is lower }} {{ x is not defined }}",
    "{{ messages[0].role is string }} {{ messages is sequence }} {{ messages[0] is mapping }} {{ 1 is sameas 1 }}",
    # unknown filters and tests under an if: reported only when they run
    "{% if false %}{{ x | nofilter }}{{ x is notest }}{% endif %}ok",
    # filters
    "[{{ '  a b  ' | trim }}][{{ 'xxaxx' | trim('x') }}][{{ '\\u3000 z \\t\\n' | trim }}][{{ undefined_name | trim }}]",
    "{{ 'abc' | upper }} {{ 'ABC' | lower }} {{ 'hello wORLD it\\'s-a (test)' | title }} {{ 'hELLO' | capitalize }}",
    "{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'ab' | replace('', '-') }}",
    "{{ [1, 2, 3] | join(', ') }} {{ ['a', 'b'] | join }} {{ [{'n': 'x'}, {'n': 'y'}] | join('/', attribute='n') }}",
    "{{ x | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ none | d('n') }} {{ 0 | d(5, boolean=true) }}",
    "{{ [3, 1, 2] | first }} {{ [3, 1, 2] | last }} {{ 'xyz' | first }} {{ [] | first }}|{{ [1, 2] | length }} {{ {'a': 1} | count }} {{ x | length }}",
    "{{ {'a': 1, 'b': [1, 2.5, 'é\\n', none, true]} | tojson }}",
    "{{ {'a': 1, 'b': [1, {}], 'c': []} | tojson(indent=2) }}",
    "{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }} {{ 'é\"\\\\/' | tojson }} {{ 'é' | tojson(ensure_ascii=true) }} {{ [1, 2] | tojson(separators=(',', ':')) }}",
    "{{ 1.0 | tojson }} {{ 1e20 | tojson }} {{ '\\x01\\t' | tojson }} {{ {1: 2, none: 3, true: 4} | tojson }}",
    "{{ [1, 2] | string }}|{{ 12 | string }}|{{ none | string }}|{{ 'x' | safe }}",
    "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ true | int }} {{ '0x1A' | int(0, 16) }} {{ '1_000' | int }}",
    "{{ '2.5' | float }} {{ 3 | float }} {{ 'z' | float }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 2.1 | round(0, 'ceil') }}",
    "{{ 'abc' | list }} {{ {'a': 1} | list }} {{ {'a': 1, 'b': 2} | items | list }} {{ x | list }}",
    "{{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ [{'a': 1}, {'a': 0}, {}] | selectattr('a') | list }}",
    "{{ [{'a': 1}, {'a': 0}] | rejectattr('a') | list }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3] | reject('equalto', 2) | list }}",
    "{{ messages | map(attribute='role') | join(',') }} {{ ['a', 'b'] | map('upper') | list }} {{ [{'a': 1}, {}] | map(attribute='a', default=0) | list }}",
    "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [{'n': 2}, {'n': 1}] | sort(attribute='n') }}",
    "{{ [1, 2, 3] | sum }} {{ [3, 1, 2] | max }} {{ [3, 1, 2] | min }} {{ [1, 2, 1, 3] | unique | list }} {{ [1, 2] | reverse | list }} {{ 'abc' | reverse }}",
    "{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(width='> ', blank=true) }}",
    "{{ '<a href=\"x\">&\\'</a>' | e }} {{ '%s and %d' | format('x', 3) }} {{ '%s-%s' % ('a', 'b') }} {{ '%05.1f|%-4s|%x' % (3.14159, 'ab', 255) }}",
    # string methods
    "[{{ '  a  '.strip() }}][{{ '  a  '.lstrip() }}][{{ '  a  '.rstrip() }}][{{ 'xxaxx'.strip('x') }}][{{ '\\n\\nq'.lstrip('\\n') }}]",
    "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ 'a  b c '.rsplit(None, 1) }}",
    "{{ 'abc'.startswith('a') }} {{ 'abc'.startswith(('x', 'ab')) }} {{ 'abc'.endswith('bc') }} {{ 'abc'.endswith('x') }}",
    "{{ 'hello world'.title() }} {{ 'it\\'s ok'.title() }} {{ 'Hello'.upper() }} {{ 'Hello'.lower() }} {{ 'hello'.capitalize() }}",
    "{{ 'a-b-a'.replace('a', 'x') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ ', '.join(['a', 'b']) }} {{ 'héllo'.find('l') }} {{ 'abc'.find('z') }} {{ 'abab'.rfind('ab') }} {{ 'aaaa'.count('aa') }}",
    "{{ '{} and {}'.format('a', 'b') }} {{ '{1}{0}'.format('a', 'b') }} {{ '{x}!'.format(x=3) }} {{ '{{}}'.format() }} {{ '{!r}'.format('q') }}",
    "{{ 'a\\nb\\r\\nc\\n'.splitlines() }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'a1'.isalnum() }} {{ 'ab'.islower() }} {{ 'AB'.isupper() }}",
    "{{ messages[0].content.upper() }} {{ messages[0]['content'].startswith('H') }} {{ 'x'.strip is defined }} {{ 'x'.nope is defined }}",
    "{% set c = 'Think</think>\\n\\nAnswer' %}{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1] }}",
    # equality and containers
    "{{ {'a': 1} == {'a': 1} }} {{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }} {{ messages[0] == {'role': 'user', 'content': 'Hi'} }} {{ x == x }} {{ none == x }}",
    "{{ [1, 2] + [3] }} {{ 'a' + 'b' }} {{ 1 + 1.5 }} {{ true + true }} {{ 10 - 2.5 }}",
]

ERRORS = [
    ("{{ x.y }}", "'x' is undefined"),
    ("{{ {'a': 1}.b.c }}", "'dict object' has no attribute 'b'"),
    ("{{ undefined_thing + 'a' }}", "'undefined_thing' is undefined"),
    ("{{ 1 + 'a' }}", "TypeError"),
    ("{{ 1 < 'a' }}", "TypeError"),
    ("{{ foo | nosuchfilter }}", "no filter named 'nosuchfilter'"),
    ("{% if x is nosuchtest %}{% endif %}", "line 1: TemplateRuntimeError: no test named 'nosuchtest'"),
    ("{{ x is nosuchtest }}", "syntax error at line 1: no test named 'nosuchtest'"),
    ("{% macro m() %}\n{{ x | nofilter }}{% endmacro %}", "syntax error at line 2: no filter named 'nofilter'"),
    ("{% if true %}{{ x | nofilter }}{% endif %}", "TemplateRuntimeError: no filter named 'nofilter'"),
    ("{{ 1 if false else x | nofilter }}", "TemplateRuntimeError: no filter named 'nofilter'"),
    ("{{ x }", "syntax error at line 1: unexpected '}'"),
    ("{{ (x] }}", "syntax error at line 1: unexpected ']', expected ')'"),
    ("line one\n{% for %}", "syntax error at line 2"),
    ("a\nb\n{% if true %}\nx", "syntax error at line 4: unexpected end of template, expected 'endif'"),
    ("\n{% endfor %}", "syntax error at line 2: unknown tag 'endfor'"),
    ("{% if x %}{% else %}{% else %}{% endif %}", "unknown tag 'else'"),
    ("{{ x = 3 }}", "syntax error at line 1: expected end of print statement, got '='"),
    ("{{ 'abc }}", "unterminated string"),
    ("{# never closed", "missing end of comment tag"),
    ("{% raw %}never closed", "missing end of raw directive"),
    ("{% break %}", "unknown tag 'break'"),
    ("{{ raise_exception('boom') }}", "TemplateError: boom"),
    ("{% if messages | length > 0 %}{{ raise_exception('Only ' ~ 2 ~ ' roles') }}{% endif %}", "TemplateError: Only 2 roles"),
    ("{{ 1 / 0 }}", "ZeroDivisionError"),
    ("{{ 5 // 0 }}", "ZeroDivisionError"),
    ("{{ range(200000) | length }}", "Range too big"),
    ("{{ [1].append(2) }}", "SecurityError"),
    ("{{ {'a': 1}.update({}) }}", "SecurityError"),
    ("{% set x = 1 %}{% set x.y = 2 %}", "non-namespace"),
    ("{% for a, b in [[1, 2, 3]] %}{% endfor %}", "unpack"),
    ("{% for x in 5 %}{% endfor %}", "not iterable"),
    ("{{ x() }}", "'x' is undefined"),
    ("{{ 5() }}", "not callable"),
    ("{{ none | length }}", "has no len()"),
    ("{{ x | tojson }}", "not JSON serializable"),
    ("{{ 'a,b'.split('') }}", "empty separator"),
    ("{{ ''.join([1]) }}", "expected str instance"),
    ("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "takes not more than 1 argument"),
    ("{{ [1, 2][::0] }}", "slice step cannot be zero"),
    ("{{ 'a' in 1 }}", "not iterable"),
    ("{{ 1 in 'a' }}", "requires string as left operand"),
]


def env():
    e = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    e.filters["tojson"] = tojson
    e.globals["raise_exception"] = raise_exception
    e.globals["strftime_now"] = lambda fmt: "04 Dec 2026"
    return e


def render(e, src):
    return e.from_string(src).render(messages=[{"role": "user", "content": "Hi"}], bos_token="<s>",
                                     eos_token="</s>", add_generation_prompt=False)


def c_str(s):
    out = []
    for b in s.encode("utf-8"):
        ch = chr(b)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif 32 <= b < 127:
            out.append(ch)
        else:
            out.append('\\%03o' % b)
    return '"' + "".join(out) + '"'


def main():
    e = env()
    rows = []
    for src in OK:
        rows.append("    {%s, %s, NULL}," % (c_str(src), c_str(render(e, src))))
    for src, msg in ERRORS:
        try:
            got = render(e, src)
        except Exception:  # jinja2 refuses it too
            rows.append("    {%s, NULL, %s}," % (c_str(src), c_str(msg)))
            continue
        sys.exit("jinja2 renders an error case: %r -> %r" % (src, got))
    print("/* test_chat_cases.h - generated by gen_chat_cases.py from Python's jinja2 %s: do not edit. */"
          % jinja2.__version__)
    print("struct unit_case {\n    const char *tmpl, *expected, *error;\n};\n")
    print("static const struct unit_case UNIT_CASES[] = {")
    print("\n".join(rows))
    print("};")


main()

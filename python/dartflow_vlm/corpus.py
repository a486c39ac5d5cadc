"""The fixed text the tiny model's tokenizer is trained on.

UI-TARS prompts and actions dominate it, so that the actions a policy writes take few tokens. It does not
depend on any seed: every tiny model shares one tokenizer, hence one vocabulary and one set of weight
shapes, which is what lets a server reload another model's weights in place.
"""

from collections.abc import Iterator

UITARS_PROMPT = """You are a GUI agent. You are given a task and your action history, with screenshots. \
You need to perform the next action to complete the task.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space

click(start_box='<|box_start|>(x1,y1)<|box_end|>')
left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')
right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
hotkey(key='')
type(content='') #If you want to submit your input, use "\\n" at the end of `content`.
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')
wait() #Sleep for 5s and take a screenshot to check for any changes.
finished(content='xxx') # Use escape characters \\', \\", and \\n in content part to ensure we can \
parse the content in normal python string format.
call_user() # Submit the task and call the user when the task is unsolvable, or when you need the user's help.

## Note
- Use English in `Thought` part.
- Write a small plan and finally summarize your next action (with its target element) in one sentence \
in `Thought` part.
- My computer's password is 'password', feel free to use it when you need sudo rights.

## User Instruction
"""

INSTRUCTIONS = [
    "Click the red box",
    "Click the button labelled OK",
    "Type your name into the text field and press enter",
    "Select the blue square, then submit",
    "Scroll down to the end of the page and click Next",
    "Open the File menu and save the document",
    "Copy the selected text with the keyboard",
    "Enter the date 2024-05-17 in the form",
]

TARGETS = ["red box", "OK button", "text field", "blue square", "Next link", "File menu", "search bar"]
WORDS = ["hello", "world", "dartflow", "Submit", "password", "search query", "2024-05-17", "OK"]
KEYS = ["enter", "ctrl c", "ctrl v", "ctrl a", "tab", "esc", "ctrl s", "alt f4", "arrowdown", "space"]
DIRECTIONS = ["down", "up", "left", "right"]


def _point(i: int) -> str:
    # Spread coordinates over a 0..1000 range so every digit and digit pair occurs.
    return f"({(i * 37) % 1000},{(i * 91 + 13) % 1000})"


def actions(i: int) -> list[str]:
    """Every UI-TARS action once, with coordinates and arguments that vary with i."""
    p, q = _point(i), _point(i + 7)
    word, key, direction = WORDS[i % len(WORDS)], KEYS[i % len(KEYS)], DIRECTIONS[i % len(DIRECTIONS)]
    return [
        f"click(start_box='{p}')",
        f"click(start_box='<|box_start|>{p}<|box_end|>')",
        f"left_double(start_box='{p}')",
        f"right_single(start_box='{p}')",
        f"drag(start_box='{p}', end_box='{q}')",
        f"hotkey(key='{key}')",
        f"type(content='{word}')",
        f"type(content='{word}\\n')",
        f"scroll(start_box='{p}', direction='{direction}')",
        "wait()",
        f"finished(content='{word}')",
        "call_user()",
    ]


def lines() -> Iterator[str]:
    """The corpus, one document per item; deterministic."""
    yield UITARS_PROMPT
    for instruction in INSTRUCTIONS:
        yield UITARS_PROMPT + instruction + "\n"
    for i in range(120):
        target = TARGETS[i % len(TARGETS)]
        for action in actions(i):
            yield f"Thought: I need to act on the {target}. I will do it now.\nAction: {action}"

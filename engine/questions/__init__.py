"""Question sets: the bundled ones (with provenance) and question files users upload."""
from engine.questions.bundled import DEFINITE, DEMO, OPEN, QUESTION_SETS, Question
from engine.questions.files import Item, from_records, load_file, parse_questions
from engine.questions.sets import SETS, SetInfo, catalogue, question_set

__all__ = ["DEFINITE", "DEMO", "OPEN", "QUESTION_SETS", "Question", "Item",
           "from_records", "load_file", "parse_questions",
           "SETS", "SetInfo", "catalogue", "question_set"]

"""Bundled question sets: demo questions, definite ones with expected answers, and open ones
(with none: a run of one is not scored)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    """One bundled question, with its expected answer when it has a definite one."""

    text: str
    expected: str | None = None


DEFINITE: list[Question] = [
    Question("A bat and a ball cost $1.10 in total. The bat costs $1.00 more than the ball. How "
             "much does the ball cost?", "$0.05"),
    Question("If it takes 5 machines 5 minutes to make 5 widgets, how many minutes would it take "
             "100 machines to make 100 widgets?", "5"),
    Question("In a lake there is a patch of lily pads. Every day the patch doubles in size. If it "
             "takes 48 days to cover the whole lake, how many days does it take to cover half of "
             "the lake?", "47"),
    Question("A farmer had 17 sheep. All but 9 ran away. How many sheep does the farmer have "
             "left?", "9"),
    Question("Emily's father has three daughters. The first two are named April and May. What is "
             "the third daughter's name?", "Emily"),
    Question("How many months of the year have at least 28 days?", "12"),
    Question("You are running a race and you overtake the runner in second place. What place are "
             "you in now?", "second"),
    Question("A doctor gives you 3 pills and tells you to take one every half hour, starting now. "
             "How many minutes will the pills last?", "60"),
    Question("Jerry received both the 15th highest and the 15th lowest mark in his class. How "
             "many students are in the class?", "29"),
    Question("A man buys a horse for $60, sells it for $70, buys it back for $80 and sells it "
             "again for $90. How much profit did he make in dollars?", "$20"),
    Question("An investor puts $8,000 into shares. After six months they are down 50%; over the "
             "next six months they rise 75%. What is the investment worth now, in dollars?",
             "$7,000"),
    Question("John can drink a barrel of water in 6 days and Mary can drink one in 12 days. How "
             "many days would it take them to drink one barrel together?", "4"),
    Question("What is 17 multiplied by 24?", "408"),
    Question("What is 15% of 80?", "12"),
    Question("A train covers 60 miles in 1.5 hours at a steady speed. What is its speed in miles "
             "per hour?", "40"),
    Question("A rectangle is 8 cm long and 5 cm wide. What is its area in square centimetres?",
             "40"),
    Question("If 3 cats catch 3 mice in 3 minutes, how many cats are needed to catch 100 mice in "
             "100 minutes?", "3"),
    Question("A shirt costs $24 after a 20% discount. What was its original price in dollars?",
             "$30"),
    Question("What is the sum of all the whole numbers from 1 to 100?", "5050"),
    Question("A snail at the bottom of a 10-metre well climbs 3 metres each day and slips back 2 "
             "metres each night. On which day does it reach the top?", "8"),
    Question("A clock takes 30 seconds to strike 6 o'clock, with the strikes evenly spaced. How "
             "many seconds does it take to strike 12 o'clock?", "66"),
    Question("How many edges does a cube have?", "12"),
    Question("A plane crashes exactly on the border between the United States and Canada. In "
             "which country are the survivors buried?", "neither"),
    Question("A price rises by 50% and then falls by 50%. By what percentage is the final price "
             "below the original?", "25%"),
    Question("A father is four times as old as his son. In 20 years he will be twice as old as "
             "his son. How old is the son now?", "10"),
    Question("How many minutes are there in two and a half hours?", "150"),
    Question("Two fair dice are rolled. What is the probability that they sum to 7, as a fraction "
             "in lowest terms?", "1/6"),
    Question("A baker has 24 rolls, sells 9 of them and then bakes 15 more. How many rolls does "
             "she have now?", "30"),
    Question("How many sides do three triangles and two squares have altogether?", "17"),
    Question("Today is Wednesday. What day of the week will it be ten days from today?",
             "Saturday"),
    Question("A car uses 8 litres of fuel per 100 km. How many litres does it need for a 250 km "
             "trip?", "20"),
    Question("Divide 30 by one half and then add 10. What is the result?", "70"),
    Question("How many two-digit whole numbers are there, from 10 to 99 inclusive?", "90"),
    Question("A box and its lid cost $11 together. The box costs $10 more than the lid. What does "
             "the lid cost in dollars?", "$0.50"),
]

OPEN: list[Question] = [
    Question("Should an early-stage software startup bootstrap or raise venture capital?"),
    Question("Should this service move to microservices?"),
    Question("Is Rust a better systems language than C++ for new projects?"),
    Question("Should a small software team adopt a four-day work week?"),
    Question("Should a company with a new office require staff on site or let them work fully "
             "remote?"),
    Question("Should a startup build its own user authentication or use a managed identity "
             "provider?"),
    Question("Should a city ban private cars from its historic centre?"),
    Question("Should a new web application store its data in a relational database or a document "
             "database?"),
    Question("Should a product team ship small releases weekly or large releases quarterly?"),
    Question("Is it better to rent or to buy a home in an expensive city?"),
    Question("Should an AI research lab open-source its strongest models?"),
    Question("Should primary schools teach programming from the age of seven?"),
    Question("Should an engineering organisation keep all its code in a monorepo or in many "
             "repositories?"),
    Question("Should a small nonprofit spend a one-off grant on staff or on technology?"),
    Question("Should a company pay down its technical debt now or ship new features first?"),
    Question("Should a consumer mobile app be built natively or with a cross-platform framework?"),
    Question("Should an independent bookshop open a second branch or invest in online sales?"),
    Question("Should a national government introduce a universal basic income?"),
    Question("Should a data team build its analytics on a data warehouse or a data lake?"),
    Question("Should a beginner learn Python or JavaScript as a first programming language?"),
    Question("Should a company running a handful of services adopt Kubernetes?"),
    Question("Should a team write its tests before the code or after it?"),
    Question("Should a growing company hire senior engineers or train junior ones?"),
]

DEMO: list[Question] = [DEFINITE[0], DEFINITE[1], OPEN[0], OPEN[1]]

QUESTION_SETS: dict[str, list[Question]] = {"definite": DEFINITE, "open": OPEN, "demo": DEMO}

